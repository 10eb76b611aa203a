"""conformance/kit/context"""
