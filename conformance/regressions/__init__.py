"""The regression corpus: documented bugs from the brokers' own trackers, each with the case that
fails on an affected version and the self-test mutation that reproduces it on a healthy broker
(data in ``data/<product>.yaml``, checked by :mod:`conformance.regressions.corpus`)."""
