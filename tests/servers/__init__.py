"""Local stand-ins for cloud APIs, on loopback, for the `gpu-auditor pull` tests."""
