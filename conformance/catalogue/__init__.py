"""conformance/catalogue"""
