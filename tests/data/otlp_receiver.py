"""An OTLP/HTTP receiver for the telemetry tests: decodes what an exporter posts to
/v1/traces and /v1/metrics with OpenTelemetry's own protobuf definitions and writes one JSON
object a line to OUT: {"kind": "span", ...} per span, {"kind": "metric", "name": ...} per
metric. Usage: otlp_receiver.py OUT; prints the port it listens on, then serves until killed.
"""

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

OUT = sys.argv[1]


def value_of(any_value):
    kind = any_value.WhichOneof("value")
    return getattr(any_value, kind) if kind else None


def attributes(kvs):
    return {kv.key: value_of(kv.value) for kv in kvs}


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        lines = []
        if self.path == "/v1/traces":
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            for rs in request.resource_spans:
                resource = attributes(rs.resource.attributes)
                for ss in rs.scope_spans:
                    for span in ss.spans:
                        lines.append(
                            {
                                "kind": "span",
                                "service": resource.get("service.name"),
                                "name": span.name,
                                "trace_id": span.trace_id.hex(),
                                "span_id": span.span_id.hex(),
                                "parent_span_id": span.parent_span_id.hex(),
                                "span_kind": span.kind,
                                "status": span.status.code,
                                "start": span.start_time_unix_nano,
                                "end": span.end_time_unix_nano,
                                "attributes": attributes(span.attributes),
                                "header": self.headers.get("x-test-header"),
                            }
                        )
        elif self.path == "/v1/metrics":
            request = ExportMetricsServiceRequest()
            request.ParseFromString(body)
            for rm in request.resource_metrics:
                for sm in rm.scope_metrics:
                    for metric in sm.metrics:
                        points = []
                        if metric.HasField("histogram"):
                            for p in metric.histogram.data_points:
                                points.append({"count": p.count, "attributes": attributes(p.attributes)})
                        lines.append({"kind": "metric", "name": metric.name, "unit": metric.unit, "points": points})
        else:
            self.send_response(404)
            self.end_headers()
            return
        with open(OUT, "a", encoding="utf-8") as out:
            for line in lines:
                out.write(json.dumps(line) + "\n")
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
