"""What the AWS adapter's modules share: one account's boto3 session and its clients (botocore's own retries off:
the pull's backoff retries throttling), which failures are throttling, and the page size asked for."""

from __future__ import annotations

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

# Our Retry backs off on throttling (bounded, injectable); botocore's own retries are turned off.
CONFIG = Config(retries={"total_max_attempts": 1}, connect_timeout=10, read_timeout=60,
                user_agent_extra="gpu-auditor")
THROTTLE_CODES = {"Throttling", "ThrottlingException", "ThrottledException", "RequestLimitExceeded",
                  "TooManyRequestsException", "RequestThrottled", "RequestThrottledException", "SlowDown",
                  "ProvisionedThroughputExceededException", "EC2ThrottledException", "PriorRequestNotComplete",
                  "BandwidthLimitExceeded"}
PAGE = 100


def throttled(e: BaseException) -> bool:
    if isinstance(e, ClientError):
        code = e.response.get("Error", {}).get("Code", "")
        status = e.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        return code in THROTTLE_CODES or status == 429
    return False


class Account:
    """One AWS account's session, and what was learnt about it that later sources need."""

    def __init__(self, session: boto3.Session, account_id: str):
        self.session = session
        self.id = account_id
        self.hosts: dict[str, str] = {}  # private DNS name -> instance id, for agent metrics keyed by host

    def client(self, service: str, region: str | None = None):
        return self.session.client(service, region_name=region, config=CONFIG)

