"""A real moto server on loopback, reached by boto3 through the standard AWS_ENDPOINT_URL variable."""

from __future__ import annotations

import logging
import urllib.request

from moto.server import ThreadedMotoServer

# Credentials for the fake accounts: planted so the tests can check that none reaches a snapshot.
ACCESS_KEY = "AKIAPLANTEDKEY000001"
SECRET_KEY = "planted-aws-secret-key-do-not-write-0123456789"
SESSION_TOKEN = "planted-aws-session-token-do-not-write-abcdef"


class MotoServer:
    def __init__(self):
        logging.getLogger("werkzeug").setLevel(logging.WARNING)  # one line per request otherwise
        self.server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self.server.start()
        host, port = self.server.get_host_and_port()
        self.url = f"http://{host}:{port}"

    def reset(self) -> None:
        # 60 s: on a loaded machine (a 2-core CI runner beside other jobs) the reset has taken over 10 s
        urllib.request.urlopen(urllib.request.Request(f"{self.url}/moto-api/reset", method="POST"), timeout=60)

    def env(self, monkeypatch, region: str = "us-east-1") -> None:
        """Point boto3 at this server and give it planted credentials; nothing from the real machine leaks in."""
        for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("AWS_ENDPOINT_URL", self.url)
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
        monkeypatch.setenv("AWS_SESSION_TOKEN", SESSION_TOKEN)
        monkeypatch.setenv("AWS_DEFAULT_REGION", region)
        monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/aws-config")
        monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/aws-credentials")
        monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")

    def stop(self) -> None:
        self.server.stop()
