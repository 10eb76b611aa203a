"""conformance/nemesis"""
