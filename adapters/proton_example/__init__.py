"""The Qpid Proton example broker: its launcher and process-target definition."""
