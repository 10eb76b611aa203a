"""conformance/kit"""
