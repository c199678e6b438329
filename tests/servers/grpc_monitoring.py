"""A loopback gRPC server that answers as Cloud Monitoring's `google.monitoring.v3.MetricService` does, for the
real google-cloud-monitoring client: grpcio's generic handlers serve `ListTimeSeries`, its messages
(de)serialized with the client's own `monitoring_v3` types. A handler maps each request and its call metadata to
a `ListTimeSeriesResponse`, or refuses it by raising `Refuse` with a gRPC status code. Every request is kept for
the test to check."""

from __future__ import annotations

from collections.abc import Callable
from concurrent import futures
from dataclasses import dataclass, field

import grpc
from google.cloud import monitoring_v3

from servers.http_api import RECORDED

SERVICE = "google.monitoring.v3.MetricService"


def recorded_time_series(name: str) -> monitoring_v3.ListTimeSeriesResponse:
    """A recorded `projects.timeSeries.list` answer (its documented JSON form) from fixtures/recorded/."""
    return monitoring_v3.ListTimeSeriesResponse.from_json((RECORDED / name).read_text(encoding="utf-8"))


class Refuse(Exception):  # noqa: N818 - raised by a handler to answer with a gRPC error status
    def __init__(self, code: grpc.StatusCode, details: str):
        super().__init__(details)
        self.code, self.details = code, details


Handler = Callable[[monitoring_v3.ListTimeSeriesRequest, dict[str, str]], monitoring_v3.ListTimeSeriesResponse]


@dataclass
class MonitoringServer:
    handler: Handler
    requests: list[monitoring_v3.ListTimeSeriesRequest] = field(default_factory=list)

    def __post_init__(self):
        def list_time_series(request, context):
            self.requests.append(request)
            try:
                return self.handler(request, dict(context.invocation_metadata()))
            except Refuse as e:
                context.abort(e.code, e.details)

        methods = {"ListTimeSeries": grpc.unary_unary_rpc_method_handler(
            list_time_series, request_deserializer=monitoring_v3.ListTimeSeriesRequest.deserialize,
            response_serializer=monitoring_v3.ListTimeSeriesResponse.serialize)}
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        self._server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, methods),))
        port = self._server.add_insecure_port("127.0.0.1:0")
        self.address = f"127.0.0.1:{port}"  # host:port, as gRPC endpoints are named
        self._server.start()

    def stop(self) -> None:
        self._server.stop(grace=None)

    def __enter__(self) -> MonitoringServer:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
