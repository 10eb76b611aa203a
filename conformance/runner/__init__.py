"""conformance/runner"""
