"""gpu-auditor: a cloud cost audit and policy linter for ML training spend on GPUs."""

__version__ = "0.1.0"
