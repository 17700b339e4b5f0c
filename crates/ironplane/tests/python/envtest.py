"""Replays controller-runtime's envtest against an asset directory made by
scripts/envtest-assets.sh: the exact command lines, readiness checks, users and stops that
envtest builds, then a few things an envtest suite does, through kubectl.

What is replayed comes from sigs.k8s.io/controller-runtime v0.24.1 (the release line for
Kubernetes v1.36). The command lines, checks and certificates are the same in v0.22 and v0.23;
those send the stop signals to the process alone where v0.24 sends them to its process group,
which is the same for a one-process server.
  pkg/internal/testing/process/bin_path_finder.go   $KUBEBUILDER_ASSETS/<name>
  pkg/internal/testing/process/process.go           State.Init (a k8s_test_framework_* temporary
                                                    directory, 20 s timeouts), CheckFlag
                                                    (`<binary> --help`), Start (poll the health
                                                    URL every 100 ms until 200, TLS unverified,
                                                    no credentials), Stop (SIGTERM, SIGKILL after
                                                    the stop timeout, then remove the directory)
  pkg/internal/testing/process/procattr_unix.go,    a new process group; signals go to the group
    signal_unix.go
  pkg/internal/testing/process/arguments.go         Arguments.AsStrings: flags sorted by name,
                                                    each as --name=value
  pkg/internal/testing/controlplane/etcd.go         Etcd.setProcessState, defaultArgs
  pkg/internal/testing/controlplane/apiserver.go    APIServer.setProcessState, defaultArgs,
                                                    discoverFlags, populateAPIServerCerts
  pkg/internal/testing/controlplane/auth.go         CertAuthn: client-cert-auth-ca.crt, AddUser
  pkg/internal/testing/controlplane/plane.go        ControlPlane.Start (etcd, the API server, the
                                                    "default" user and its kubeconfig in the cert
                                                    directory), Stop (the API server, then etcd)
  pkg/internal/testing/certs/tinyca.go              ECDSA P-256 CAs and certificates, PKCS#8 keys
  pkg/envtest/server.go                             Environment.Start: the "admin" user in
                                                    system:masters, waitForDefaultNamespace
  pkg/envtest/webhook.go                            WebhookInstallOptions: setupCA (the caBundle
                                                    is the webhook's serving certificate itself),
                                                    updateClientConfig (the URL is
                                                    https://host:port/ + the service's path)

Environment: KUBEBUILDER_ASSETS (the asset directory). Prints "envtest replay: ok" at the end.
"""
import base64
import datetime
import glob
import http.server
import hashlib
import ipaddress
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

ASSETS = os.environ["KUBEBUILDER_ASSETS"]
# process.State.Init's defaults, which envtest's defaultTimeouts keeps (20 s each).
START_TIMEOUT = 20.0
STOP_TIMEOUT = 20.0
POLL_INTERVAL = 0.1


# The processes started and not yet stopped, killed if the replay fails half-way.
RUNNING = []


def fail(msg):
    print(f"FAIL {msg}", flush=True)
    for p in RUNNING:
        try:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        except OSError:
            pass
    sys.exit(1)


def bin_path(name):
    """BinPathFinder with KUBEBUILDER_ASSETS set."""
    return os.path.join(ASSETS, name)


def suggest_port():
    """addr.Suggest(""): a free port on localhost, and the address localhost resolved to."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("localhost", 0))
        host, port = s.getsockname()
    return port, host


def check_flag(path, flag):
    """State.CheckFlag: `<binary> --help` must succeed; is --<flag> listed at a line start?"""
    out = subprocess.run([path, "--help"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if out.returncode != 0:
        fail(f"{path} --help exited {out.returncode}: envtest refuses to start it\n"
             f"{out.stdout.decode()}")
    return re.search(rb"(?m)^\s*--" + flag.encode() + rb"\b", out.stdout) is not None


# --- certificates, as tinyca.go makes them ---

def now():
    return datetime.datetime.now(datetime.timezone.utc)


def pem_key(key):
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


class TinyCA:
    """certs.NewTinyCA: a self-signed ECDSA P-256 CA, CN=envtest-environment O=envtest."""

    def __init__(self):
        self.key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "envtest-environment"),
                          x509.NameAttribute(NameOID.ORGANIZATION_NAME, "envtest")])
        ski = x509.SubjectKeyIdentifier.from_public_key(self.key.public_key())
        self.cert = (x509.CertificateBuilder()
                     .subject_name(name).issuer_name(name)
                     .public_key(self.key.public_key())
                     .serial_number(x509.random_serial_number())
                     .not_valid_before(now()).not_valid_after(now() + datetime.timedelta(days=3650))
                     .add_extension(x509.KeyUsage(True, False, True, False, False, True, False,
                                                  False, False), critical=True)
                     .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                     .add_extension(ski, critical=False)
                     .sign(self.key, hashes.SHA256()))
        self.serial = 1

    def cert_pem(self):
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def make(self, cn, orgs, usage, dns=(), ips=()):
        """TinyCA.makeCert: a week's validity, serials from 1."""
        key = ec.generate_private_key(ec.SECP256R1())
        attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs]
        attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, cn))
        b = (x509.CertificateBuilder()
             .subject_name(x509.Name(attrs)).issuer_name(self.cert.subject)
             .public_key(key.public_key())
             .serial_number(self.serial)
             .not_valid_before(now()).not_valid_after(now() + datetime.timedelta(hours=168))
             .add_extension(x509.KeyUsage(True, False, True, False, False, False, False, False,
                                          False), critical=True)
             .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
             .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                 self.key.public_key()), critical=False))
        sans = [x509.DNSName(d) for d in dns]
        sans += [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
        if sans:
            b = b.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        self.serial += 1
        cert = b.sign(self.key, hashes.SHA256())
        return cert.public_bytes(serialization.Encoding.PEM), pem_key(key)


def write(path, data, mode=0o640):
    with open(path, "wb") as f:
        f.write(data)
    os.chmod(path, mode)


# --- processes, as process.State runs them ---

class Process:
    def __init__(self, name, args, health_url, directory):
        self.name = name
        self.args = args
        self.health_url = health_url
        self.dir = directory
        # envtest discards the output unless KUBEBUILDER_ATTACH_CONTROL_PLANE_OUTPUT is set; it
        # is kept here to explain a failure.
        self.log_path = os.path.join(tempfile.gettempdir(), f"envtest-replay-{name}.log")
        self.proc = None

    def log(self):
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def start(self):
        """State.Start: launch in a new process group, poll the health URL until 200."""
        log = open(self.log_path, "wb")
        started = time.monotonic()
        self.proc = subprocess.Popen([bin_path(self.name)] + self.args, stdout=log, stderr=log,
                                     stdin=subprocess.DEVNULL, process_group=0)
        RUNNING.append(self.proc)
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE  # InsecureSkipVerify, as pollURLUntilOK does
        while True:
            try:
                with urllib.request.urlopen(self.health_url, context=ctx, timeout=5) as r:
                    if r.status == 200:
                        break
            except (urllib.error.URLError, OSError):
                pass
            if self.proc.poll() is not None:
                fail(f"{self.name} exited with {self.proc.returncode} before it was ready "
                     f"(envtest: 'it may have failed to start'):\n{self.log()}")
            if time.monotonic() - started > START_TIMEOUT:
                os.killpg(self.proc.pid, signal.SIGTERM)
                fail(f"timeout waiting for process {self.name} to start:\n{self.log()}")
            time.sleep(POLL_INTERVAL)
        elapsed = time.monotonic() - started
        print(f"{self.name}: {self.health_url} answered 200 after {elapsed:.2f}s", flush=True)
        return elapsed

    def stop(self):
        """State.Stop: SIGTERM to the process group, SIGKILL after the stop timeout (an error
        for envtest), then the directory is removed."""
        started = time.monotonic()
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            fail(f"timeout waiting for process {self.name} to stop:\n{self.log()}")
        elapsed = time.monotonic() - started
        RUNNING.remove(self.proc)
        shutil.rmtree(self.dir, ignore_errors=True)
        # envtest does not look at the exit status; a clean stop exits 0 all the same.
        if code != 0:
            fail(f"{self.name} exited with {code} on SIGTERM:\n{self.log()}")
        print(f"{self.name}: stopped by SIGTERM in {elapsed:.2f}s, exit 0", flush=True)
        return elapsed


# --- users, as CertAuthn provisions them and KubeConfigFromREST writes them ---

def kubeconfig(path, server, ca_pem, cert_pem, key_pem):
    b = lambda d: base64.b64encode(d).decode()
    config = {
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "envtest", "cluster": {
            "server": server, "certificate-authority-data": b(ca_pem)}}],
        "users": [{"name": "envtest", "user": {
            "client-certificate-data": b(cert_pem), "client-key-data": b(key_pem)}}],
        "contexts": [{"name": "envtest", "context": {"cluster": "envtest", "user": "envtest"}}],
        "current-context": "envtest",
    }
    write(path, json.dumps(config).encode(), 0o600)
    return path


def kubectl(config, *args, stdin=None, ok=True):
    out = subprocess.run([bin_path("kubectl"), f"--kubeconfig={config}", *args],
                         input=stdin.encode() if stdin else None,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if ok and out.returncode != 0:
        fail(f"kubectl {' '.join(args)}: {out.stderr.decode()}{out.stdout.decode()}")
    if not ok and out.returncode == 0:
        fail(f"kubectl {' '.join(args)} should have failed: {out.stdout.decode()}")
    return out.stdout.decode() if ok else out.stderr.decode()


def b64url_decode(s):
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def main():
    for name in ["kube-apiserver", "etcd", "kubectl"]:
        if not os.access(bin_path(name), os.X_OK):
            fail(f"{bin_path(name)} is missing from KUBEBUILDER_ASSETS")

    # ControlPlane.Start, first Etcd.Start (etcd.go).
    etcd_dir = tempfile.mkdtemp(prefix="k8s_test_framework_")
    etcd_port, etcd_host = suggest_port()
    etcd_url = f"http://{etcd_host}:{etcd_port}"
    peer_port, peer_host = suggest_port()
    etcd_defaults = {
        "listen-peer-urls": [f"http://{peer_host}:{peer_port}"],
        "data-dir": [etcd_dir],
        "advertise-client-urls": [etcd_url],
        "listen-client-urls": [etcd_url],
    }
    # etcd 3.5 and later list --unsafe-no-fsync; envtest turns it on when listed.
    if not check_flag(bin_path("etcd"), "unsafe-no-fsync"):
        fail("etcd --help does not list --unsafe-no-fsync, unlike etcd 3.5+")
    etcd_defaults["unsafe-no-fsync"] = ["true"]
    etcd_args = as_strings(etcd_defaults)
    expected_etcd = [
        f"--advertise-client-urls={etcd_url}",
        f"--data-dir={etcd_dir}",
        f"--listen-client-urls={etcd_url}",
        f"--listen-peer-urls=http://{peer_host}:{peer_port}",
        "--unsafe-no-fsync=true",
    ]
    assert etcd_args == expected_etcd, etcd_args
    print("etcd " + " ".join(etcd_args), flush=True)
    etcd = Process("etcd", etcd_args, etcd_url + "/health", etcd_dir)
    etcd.start()

    # Then APIServer.Start (apiserver.go).
    cert_dir = tempfile.mkdtemp(prefix="k8s_test_framework_")
    port, host = suggest_port()
    health = f"https://{host}:{port}/healthz"
    serving_ca = TinyCA()
    crt, key = serving_ca.make("localhost", ["envtest"], ExtendedKeyUsageOID.SERVER_AUTH,
                               dns=["localhost"], ips=[host])
    write(os.path.join(cert_dir, "apiserver.crt"), crt)
    write(os.path.join(cert_dir, "apiserver.key"), key)
    serving_crt_digest = hashlib.sha256(crt).hexdigest()
    sa_ca = TinyCA()
    write(os.path.join(cert_dir, "sa-signer.crt"), sa_ca.cert_pem())
    write(os.path.join(cert_dir, "sa-signer.key"), pem_key(sa_ca.key))
    client_ca = TinyCA()  # NewCertAuthn
    client_ca_path = os.path.join(cert_dir, "client-cert-auth-ca.crt")
    # discoverFlags: --insecure-port is passed (as 0) only to servers that list it (< 1.24).
    if check_flag(bin_path("kube-apiserver"), "insecure-port"):
        fail("kube-apiserver --help lists --insecure-port, which v1.24+ does not have")
    apiserver_defaults = {
        "service-cluster-ip-range": ["10.0.0.0/24"],
        "allow-privileged": ["true"],
        "disable-admission-plugins": ["ServiceAccount"],
        "cert-dir": [cert_dir],
        "authorization-mode": ["RBAC"],
        "secure-port": [str(port)],
        "bind-address": [host],
        "service-account-issuer": [f"https://{host}:{port}/"],
        "service-account-key-file": [os.path.join(cert_dir, "sa-signer.crt")],
        "service-account-signing-key-file": [os.path.join(cert_dir, "sa-signer.key")],
        "etcd-servers": [etcd_url],
        # CertAuthn.Configure: args.Set("client-ca-file", ...)
        "client-ca-file": [client_ca_path],
    }
    apiserver_args = as_strings(apiserver_defaults)
    expected_apiserver = [
        "--allow-privileged=true",
        "--authorization-mode=RBAC",
        f"--bind-address={host}",
        f"--cert-dir={cert_dir}",
        f"--client-ca-file={client_ca_path}",
        "--disable-admission-plugins=ServiceAccount",
        f"--etcd-servers={etcd_url}",
        f"--secure-port={port}",
        f"--service-account-issuer=https://{host}:{port}/",
        f"--service-account-key-file={cert_dir}/sa-signer.crt",
        f"--service-account-signing-key-file={cert_dir}/sa-signer.key",
        "--service-cluster-ip-range=10.0.0.0/24",
    ]
    assert apiserver_args == expected_apiserver, apiserver_args
    # CertAuthn.Start writes the client CA just before the server starts.
    write(client_ca_path, client_ca.cert_pem())
    print("kube-apiserver " + " ".join(apiserver_args), flush=True)
    apiserver = Process("kube-apiserver", apiserver_args, health, cert_dir)
    apiserver.start()

    server = f"https://{host}:{port}/"  # SecureServing.URL("https", "/")
    ca_pem = serving_ca.cert_pem()
    # ControlPlane.Start: the legacy "default" user, its kubeconfig a *.kubecfg in the cert dir.
    crt, key = client_ca.make("default", ["system:masters"], ExtendedKeyUsageOID.CLIENT_AUTH)
    default_cfg = kubeconfig(tempfile.mktemp(suffix=".kubecfg", dir=cert_dir), server, ca_pem,
                             crt, key)
    # Environment.Start: the "admin" user in system:masters; te.Config is its REST config.
    crt, key = client_ca.make("admin", ["system:masters"], ExtendedKeyUsageOID.CLIENT_AUTH)
    admin = kubeconfig(os.path.join(tempfile.gettempdir(), "envtest-replay-admin.kubeconfig"),
                       server, ca_pem, crt, key)
    admin_crt = os.path.join(tempfile.gettempdir(), "envtest-replay-admin.crt")
    admin_key = os.path.join(tempfile.gettempdir(), "envtest-replay-admin.key")
    write(admin_crt, crt, 0o600)
    write(admin_key, key, 0o600)

    # waitForDefaultNamespace: GET the default namespace as admin, every 50 ms for 5 s, with
    # client-go's TLS: the server's certificate verified against envtest's serving CA.
    ctx = ssl.create_default_context(cadata=ca_pem.decode())
    ctx.load_cert_chain(admin_crt, admin_key)
    deadline = time.monotonic() + 5
    while True:
        try:
            with urllib.request.urlopen(server + "api/v1/namespaces/default", context=ctx,
                                        timeout=5) as r:
                if r.status == 200:
                    break
        except (urllib.error.URLError, OSError) as e:
            last = e
        if time.monotonic() > deadline:
            fail(f"default namespace didn't register within deadline: {last}")
        time.sleep(0.05)
    print("the default namespace is there, read as admin with the serving CA verified",
          flush=True)

    # What the log says about what it ignores, and where the store is.
    log = apiserver.log()
    if f"--etcd-servers={etcd_url} ignored" not in log:
        fail(f"the server does not say that --etcd-servers is ignored:\n{log}")
    if not os.path.exists(os.path.join(cert_dir, "ironplane-data", "state.db")):
        fail("the store is not under --cert-dir/ironplane-data")
    with open(os.path.join(cert_dir, "apiserver.crt"), "rb") as f:
        if hashlib.sha256(f.read()).hexdigest() != serving_crt_digest:
            fail("envtest's apiserver.crt was overwritten")

    # An envtest suite at work, through kubectl.
    version = json.loads(kubectl(admin, "version", "-o", "json"))
    if not version["serverVersion"]["gitVersion"].startswith("v1.36."):
        fail(f"server version {version['serverVersion']}")
    who = json.loads(kubectl(admin, "auth", "whoami", "-o", "json"))["status"]["userInfo"]
    if who["username"] != "admin" or "system:masters" not in who.get("groups", []):
        fail(f"admin is {who}")
    if "default" not in kubectl(default_cfg, "get", "namespace", "default", "-o", "name"):
        fail("the default user cannot read the default namespace")

    ns = "envtest-replay"
    kubectl(admin, "create", "namespace", ns)
    kubectl(admin, "-n", ns, "create", "configmap", "settings", "--from-literal=mode=replay")
    got = kubectl(admin, "-n", ns, "get", "configmap", "settings", "-o",
                  "jsonpath={.data.mode}")
    if got != "replay":
        fail(f"configmap data {got!r}")

    # A CRD installed as envtest installs them, then a custom resource.
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                 "versions": [{"name": "v1", "served": True, "storage": True, "schema": {
                     "openAPIV3Schema": {"type": "object", "properties": {"spec": {
                         "type": "object", "properties": {"size": {"type": "integer"}}}}}}}]},
    }
    kubectl(admin, "apply", "-f", "-", stdin=json.dumps(crd))
    kubectl(admin, "wait", "--for=condition=Established", "--timeout=10s",
            "crd/widgets.example.com")
    widget = {"apiVersion": "example.com/v1", "kind": "Widget",
              "metadata": {"name": "w1", "namespace": ns}, "spec": {"size": 3}}
    kubectl(admin, "create", "-f", "-", stdin=json.dumps(widget))
    if kubectl(admin, "-n", ns, "get", "widget", "w1", "-o", "jsonpath={.spec.size}") != "3":
        fail("the custom resource does not read back")

    # --allow-privileged=true and --disable-admission-plugins=ServiceAccount: a privileged pod
    # is admitted, and gets no service-account token volume.
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": ns},
           "spec": {"containers": [{"name": "c", "image": "busybox",
                                    "securityContext": {"privileged": True}}]}}
    kubectl(admin, "create", "-f", "-", stdin=json.dumps(pod))
    volumes = kubectl(admin, "-n", ns, "get", "pod", "p", "-o", "jsonpath={.spec.volumes}")
    if "kube-api-access" in volumes:
        fail(f"the ServiceAccount admission plugin ran although disabled: {volumes}")

    # --authorization-mode=RBAC: a user outside system:masters (ControlPlane.AddUser) is denied
    # until a binding allows it.
    crt, key = client_ca.make("dev", ["developers"], ExtendedKeyUsageOID.CLIENT_AUTH)
    dev = kubeconfig(os.path.join(tempfile.gettempdir(), "envtest-replay-dev.kubeconfig"),
                     server, ca_pem, crt, key)
    denied = kubectl(dev, "-n", ns, "get", "configmaps", ok=False)
    if "Forbidden" not in denied and "forbidden" not in denied:
        fail(f"dev was not forbidden: {denied}")
    kubectl(admin, "-n", ns, "create", "rolebinding", "dev-view", "--clusterrole=view",
            "--user=dev")
    deadline = time.monotonic() + 5
    while True:
        out = subprocess.run([bin_path("kubectl"), f"--kubeconfig={dev}", "-n", ns, "get",
                              "configmap", "settings", "-o", "name"], capture_output=True)
        if out.returncode == 0:
            break
        if time.monotonic() > deadline:
            fail(f"dev still denied after the binding: {out.stderr.decode()}")
        time.sleep(0.05)

    # --service-account-*: a token signed with envtest's sa-signer.key, issued by the URL
    # envtest gave, that the server accepts.
    deadline = time.monotonic() + 10
    while subprocess.run([bin_path("kubectl"), f"--kubeconfig={admin}", "-n", ns, "get",
                          "serviceaccount", "default"], capture_output=True).returncode != 0:
        if time.monotonic() > deadline:
            fail("no default ServiceAccount")
        time.sleep(0.05)
    token = kubectl(admin, "-n", ns, "create", "token", "default").strip()
    header, payload, signature = token.split(".")
    claims = json.loads(b64url_decode(payload))
    if claims["iss"] != server:
        fail(f"token issuer {claims['iss']!r}, not {server!r}")
    raw = b64url_decode(signature)
    der = encode_dss_signature(int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big"))
    sa_ca.cert.public_key().verify(der, f"{header}.{payload}".encode(),
                                   ec.ECDSA(hashes.SHA256()))
    ca_file = os.path.join(tempfile.gettempdir(), "envtest-replay-ca.crt")
    write(ca_file, ca_pem)
    who = subprocess.run([bin_path("kubectl"), "--kubeconfig=/dev/null", f"--server={server}",
                          f"--certificate-authority={ca_file}", f"--token={token}", "auth",
                          "whoami", "-o", "jsonpath={.status.userInfo.username}"],
                         capture_output=True)
    name = who.stdout.decode()
    if name != f"system:serviceaccount:{ns}:default":
        fail(f"the token authenticates as {name!r}: {who.stderr.decode()}")
    print("objects, a CRD, RBAC and service-account tokens work through kubectl", flush=True)

    # A validating webhook installed as WebhookInstallOptions installs it, served the way a
    # test's webhook server serves it, rejecting every request.
    envtest_webhook(admin, ns)

    # ControlPlane.Stop: the API server first (with a watch still open, as a test's manager
    # often leaves one), then etcd; each directory goes after its process.
    watch = subprocess.Popen([bin_path("kubectl"), f"--kubeconfig={admin}", "-n", ns, "get",
                              "configmaps", "--watch"], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    time.sleep(0.3)
    stopped = apiserver.stop()
    watch.kill()
    watch.wait()
    if os.path.exists(cert_dir):
        fail("the cert directory is still there")
    etcd.stop()
    for leftover in glob.glob(os.path.join(tempfile.gettempdir(), "envtest-replay-*")):
        os.remove(leftover)
    print(f"envtest replay: ok (kube-apiserver stopped in {stopped:.2f}s)", flush=True)


class Rejecting(http.server.BaseHTTPRequestHandler):
    """An admission webhook that denies everything, at /failing only."""

    def do_POST(self):
        review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path.split("?")[0] != "/failing":
            self.send_response(404)
            self.end_headers()
            return
        body = json.dumps({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "response": {"uid": review["request"]["uid"], "allowed": False,
                         "status": {"code": 403, "reason": "Forbidden",
                                    "message": "Always denied"}},
        }).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def envtest_webhook(admin, ns):
    port, host = suggest_port()  # generateHostPort
    hook_ca = TinyCA()  # setupCA: names localhost, the serving host (and an empty external name)
    crt, key = hook_ca.make("localhost", ["envtest"], ExtendedKeyUsageOID.SERVER_AUTH,
                            dns=["localhost"], ips=[host])
    cert_dir = tempfile.mkdtemp(prefix="envtest-serving-certs-")
    write(os.path.join(cert_dir, "tls.crt"), crt)
    write(os.path.join(cert_dir, "tls.key"), key)
    server = http.server.ThreadingHTTPServer((host, port), Rejecting)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(os.path.join(cert_dir, "tls.crt"), os.path.join(cert_dir, "tls.key"))
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    # updateClientConfig: the service reference becomes a URL, host:port + "/" + path, and
    # the caBundle is LocalServingCAData, which is the serving certificate.
    url = f"https://{host}:{port}/" + "/failing"
    config = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "deployment-validation-webhook-config"},
        "webhooks": [{
            "name": "deployment-validation.kubebuilder.io",
            "rules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
                       "operations": ["CREATE", "UPDATE"], "resources": ["deployments"]}],
            "failurePolicy": "Fail", "matchPolicy": "Equivalent", "sideEffects": "None",
            "clientConfig": {"url": url, "caBundle": base64.b64encode(crt).decode()},
            "admissionReviewVersions": ["v1"],
        }],
    }
    kubectl(admin, "create", "-f", "-", stdin=json.dumps(config))
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "test-deployment", "namespace": ns},
        "spec": {"selector": {"matchLabels": {"foo": "bar"}},
                 "template": {"metadata": {"labels": {"foo": "bar"}},
                              "spec": {"containers": [{"name": "nginx", "image": "nginx"}]}}},
    }
    # As the test does: Eventually, within a second, the create is refused by the webhook.
    deadline = time.monotonic() + 1
    while True:
        out = subprocess.run([bin_path("kubectl"), f"--kubeconfig={admin}", "create", "-f", "-"],
                             input=json.dumps(deployment).encode(), capture_output=True)
        err = out.stderr.decode()
        if out.returncode != 0 and "Always denied" in err:
            break
        if time.monotonic() > deadline:
            fail(f"the webhook did not deny the deployment: {err}{out.stdout.decode()}")
        time.sleep(0.05)
    server.shutdown()
    kubectl(admin, "delete", "validatingwebhookconfiguration",
            "deployment-validation-webhook-config")
    shutil.rmtree(cert_dir, ignore_errors=True)
    print("a webhook installed as envtest installs it denies requests", flush=True)


def as_strings(defaults):
    """Arguments.AsStrings with nothing configured: every default, sorted by flag name."""
    return [f"--{k}={v}" for k in sorted(defaults) for v in defaults[k]]


if __name__ == "__main__":
    main()
