"""/metrics and /metrics/slis read by Prometheus's own Python parser (prometheus_client), with the
counters checked against the requests this script makes between two scrapes: creates, gets (one
of a missing object), lists, a watch, a dry run and an apply, each under upstream's labels."""
import json

from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException
from prometheus_client.parser import text_string_to_metric_families

from common import Raw

NS = "default"


def scrape(raw, path="/metrics"):
    status, headers, body = raw.request("GET", path)
    assert status == 200, (path, status, body)
    ctype = headers.get("Content-Type")
    assert ctype == "text/plain; version=0.0.4; charset=utf-8", ctype
    text = body.decode()
    samples = {}
    types = {}
    # The parser raises on anything that is not the exposition format.
    for family in text_string_to_metric_families(text):
        types[family.name] = family.type
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return samples, types


def value(samples, metric, **labels):
    """The sum of the samples of `metric` whose labels include `labels`."""
    total = 0.0
    for (n, ls), v in samples.items():
        if n == metric and all(dict(ls).get(k) == str(want) for k, want in labels.items()):
            total += v
    return total


def delta(before, after, metric, **labels):
    return value(after, metric, **labels) - value(before, metric, **labels)


def request(verb, code, scope, dry_run="", resource="configmaps", **extra):
    return dict(verb=verb, code=code, scope=scope, dry_run=dry_run, group="", version="v1",
                resource=resource, subresource="", component="apiserver", **extra)


def main():
    config.load_kube_config()
    core = client.CoreV1Api()
    raw = Raw()

    before, types = scrape(raw)
    assert types["apiserver_request"] == "counter", types.get("apiserver_request")
    assert types["apiserver_request_duration_seconds"] == "histogram"
    assert types["process_resident_memory_bytes"] == "gauge"
    assert value(before, "process_resident_memory_bytes") > 0

    cm = {"metadata": {"name": "metered"}, "data": {"a": "1"}}
    core.create_namespaced_config_map(NS, cm)
    core.create_namespaced_config_map(NS, {"metadata": {"name": "dry"}}, dry_run="All")
    for _ in range(3):
        core.read_namespaced_config_map("metered", NS)
    try:
        core.read_namespaced_config_map("missing", NS)
        raise AssertionError("a missing ConfigMap was found")
    except ApiException as e:
        assert e.status == 404, e.status
    for _ in range(2):
        core.list_namespaced_config_map(NS)
    events = list(watch.Watch().stream(core.list_namespaced_config_map, NS, timeout_seconds=1))
    assert any(e["object"].metadata.name == "metered" for e in events), events
    body = json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": "metered"}, "data": {"b": "2"}})
    status, _, answer = raw.request(
        "PATCH", f"/api/v1/namespaces/{NS}/configmaps/metered?fieldManager=metrics-test&force=true",
        body=body, content_type="application/apply-patch+yaml")
    assert status == 200, (status, answer)

    after, _ = scrape(raw)
    total = "apiserver_request_total"
    checks = [
        (request("POST", 201, "resource"), 1),
        (request("POST", 201, "resource", dry_run="All"), 1),
        (request("GET", 200, "resource"), 3),
        (request("GET", 404, "resource"), 1),
        (request("LIST", 200, "namespace"), 2),
        (request("WATCH", 200, "namespace"), 1),
        (request("APPLY", 200, "resource"), 1),
    ]
    for labels, want in checks:
        got = delta(before, after, total, **labels)
        assert got == want, (labels, got, want)
        # Every counted request is in the latency histogram under the same labels.
        hist = {k: v for k, v in labels.items() if k != "code"}
        got = delta(before, after, "apiserver_request_duration_seconds_count", **hist)
        assert got >= want, ("duration", labels, got)
    # Sizes are recorded for GET and LIST only: three found, one missing.
    sizes = delta(before, after, "apiserver_response_sizes_count", verb="GET",
                  resource="configmaps")
    assert sizes == 4, sizes
    assert delta(before, after, "apiserver_response_sizes_sum", verb="LIST",
                 resource="configmaps") > 0

    # Storage: one create reached the backend (the dry run did not); the cache counts objects.
    got = delta(before, after, "etcd_requests_total", operation="create", resource="configmaps")
    assert got == 1, got
    assert value(after, "apiserver_storage_objects", resource="configmaps") >= 1
    assert value(after, "apiserver_watch_cache_events_received_total",
                 resource="configmaps") >= 1
    assert delta(before, after, "apiserver_watch_events_total", resource="configmaps") >= 1

    # Admission ran for the two creates and the apply, authentication and authorization for
    # every request.
    got = delta(before, after, "apiserver_admission_step_admission_duration_seconds_count",
                type="validate", operation="CREATE", rejected="false")
    assert got == 2, got
    # Upstream's family is `authentication_attempts` (no suffix): the parser names its counter
    # samples `_total`.
    assert types["authentication_attempts"] == "counter"
    assert delta(before, after, "authentication_attempts_total", result="success") >= 11
    assert delta(before, after, "authorization_attempts_total", result="allowed") >= 11

    # The scrape itself was executing while it was written: at least one read-only request.
    assert value(after, "apiserver_current_inflight_requests", request_kind="readOnly") >= 1
    assert types["apiserver_current_inflight_requests"] == "gauge"

    # The scrape itself is not a route that upstream instruments.
    assert value(after, total, subresource="/metrics") == 0

    # /metrics/slis: the health checks /readyz just ran.
    status, _, _ = raw.request("GET", "/readyz")
    assert status == 200, status
    slis, slis_types = scrape(raw, "/metrics/slis")
    assert slis_types["kubernetes_healthchecks"] == "counter", slis_types
    assert value(slis, "kubernetes_healthchecks_total", name="ping", type="readyz",
                 status="success") >= 1
    assert value(slis, "kubernetes_healthcheck", name="ping", type="readyz") == 1
    assert value(slis, "process_start_time_seconds") > 0
    print("metrics: ok")


main()
