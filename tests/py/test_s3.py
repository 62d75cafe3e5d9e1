"""s3:// sources against a real S3 server on loopback (moto_server), with
boto3 uploads: the three layouts read as their local copies, warm and the
loader, identity per key/size/ETag, keys with special characters, injected
5xx / throttling / dropped connections / stalls, 403 and 404 named, a wrong
secret rejected by a signature-checking server, our SigV4 signer
compared with botocore's, and AWS_CA_BUNDLE trusted for https. (Hostile
endpoints: HostileS3Test in tests/cc/s3_source_test.cc.)"""

import os
import subprocess
import urllib.parse
import urllib.request

import numpy as np
import pytest

import ssdfeed
from ssdfeed import _ssdfeed

boto3 = pytest.importorskip("boto3", reason="boto3 not installed (pip install boto3)")
pytest.importorskip("moto.server", reason="moto[server] not installed (pip install 'moto[server]')")

from s3_util import FaultProxy, MotoServer, upload_tree  # noqa: E402

BUCKET = "data"
CREDS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
         "AWS_REGION": "us-east-1"}


@pytest.fixture(scope="module")
def moto():
    server = MotoServer()
    yield server
    server.close()


def client(url, **creds):
    c = dict(CREDS, **creds)
    return boto3.client("s3", endpoint_url=url, region_name=c["AWS_REGION"],
                        aws_access_key_id=c["AWS_ACCESS_KEY_ID"],
                        aws_secret_access_key=c["AWS_SECRET_ACCESS_KEY"])


@pytest.fixture(scope="module")
def bucket(moto, small_datasets):
    """The three small datasets uploaded under tfrecord/, tar/, folder/."""
    s3 = client(moto.url)
    s3.create_bucket(Bucket=BUCKET)
    for fmt, rep in small_datasets.items():
        root = os.path.dirname(rep["uri"].split(":", 1)[1]) if fmt != "folder" else \
            rep["uri"].split(":", 1)[1]
        upload_tree(s3, BUCKET, root, fmt + "/")
    return s3


@pytest.fixture
def s3env(monkeypatch, moto):
    for k, v in CREDS.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto.url)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.setenv("SSDFEED_S3_BACKOFF_MS", "1")
    return monkeypatch


S3_URIS = {
    "tfrecord": f"tfrecord:s3://{BUCKET}/tfrecord/train-*.tfrecord",
    "tar": f"tar:s3://{BUCKET}/tar/shard-{{000000..000002}}.tar",
    "folder": f"folder:s3://{BUCKET}/folder",
}


def read_all(src):
    return [src.read(i) for i in range(len(src))]


@pytest.mark.parametrize("fmt", ["tfrecord", "tar", "folder"])
def test_s3_reads_what_the_local_copy_holds(s3env, bucket, small_datasets, fmt):
    s3env.setenv("SSDFEED_S3_LIST_PAGE_SIZE", "7")  # listings of several pages
    local = ssdfeed.Source(small_datasets[fmt]["uri"])
    remote = ssdfeed.Source(S3_URIS[fmt])
    assert len(remote) == len(local) == 48
    assert read_all(remote) == read_all(local)
    assert remote.describe(0).startswith(f"s3://{BUCKET}/{fmt}/")
    assert remote.identity != local.identity


def test_bare_s3_uri_infers_the_layout(s3env, bucket, small_datasets):
    for fmt, uri in [("tar", f"s3://{BUCKET}/tar/shard-*.tar"),
                     ("tfrecord", f"s3://{BUCKET}/tfrecord/train-*.tfrecord"),
                     ("folder", f"s3://{BUCKET}/folder/")]:
        local = ssdfeed.Source(small_datasets[fmt]["uri"])
        assert read_all(ssdfeed.Source(uri)) == read_all(local), fmt


def test_warm_then_loader_serves_from_the_cache(s3env, bucket, small_datasets, tmp_path):
    cache = str(tmp_path / "cache")
    uri = S3_URIS["tfrecord"]
    r = subprocess.run(["ssdfeed", "warm", "--source", uri, "--cache", cache, "--resize", "32x32",
                        "--json", "--quiet"], capture_output=True, text=True, env=os.environ)
    assert r.returncode == 0, r.stderr
    assert '"samples_present":48' in r.stdout.replace(" ", "")
    prep = ssdfeed.Prepare(resize=(32, 32))
    got = ssdfeed.Loader(uri, cache=cache, prepare=prep, batch_size=48)
    images, labels = next(iter(got))
    stats = got.stats()
    ref = ssdfeed.Loader(small_datasets["tfrecord"]["uri"], cache=False, prepare=prep,
                         batch_size=48)
    ref_images, ref_labels = next(iter(ref))
    assert np.array_equal(images, ref_images) and np.array_equal(labels, ref_labels)
    assert stats["cache_hits"] == 48 and stats["cache_misses"] == 0, stats


def test_replaced_object_is_a_new_identity_and_old_reads_fail(s3env, moto, tmp_path):
    s3 = client(moto.url)
    s3.create_bucket(Bucket="replace")
    rep = ssdfeed.make_dataset(str(tmp_path / "d"), format="folder", count=6, classes=2, seed=1,
                               min_side=32, max_side=48)
    keys = upload_tree(s3, "replace", rep["uri"].split(":", 1)[1], "")
    before = ssdfeed.Source("folder:s3://replace/")
    other = open(os.path.join(rep["uri"].split(":", 1)[1], keys[1]), "rb").read()
    s3.put_object(Bucket="replace", Key=keys[0], Body=other)  # same size class, new ETag
    after = ssdfeed.Source("folder:s3://replace/")
    assert after.identity != before.identity
    assert after.read(0)[0] == other
    with pytest.raises(Exception, match=f"s3://replace/{keys[0]}.*changed since"):
        before.read(0)
    s3.delete_object(Bucket="replace", Key=keys[2])
    with pytest.raises(Exception, match=f"s3://replace/{keys[2]}.*404"):
        after.read(2)


SPECIAL = ["sp ace/a b.jpg", "eq=ual/x=1+2.jpg", "co:lon/t:1 +.png", "ünï/ça va €.jpg",
           "ünï/日本.jpeg", "sp ace/%41~!'()*.jpg"]


def test_special_character_keys(s3env, moto, small_datasets):
    s3 = client(moto.url)
    s3.create_bucket(Bucket="special")
    src = ssdfeed.Source(small_datasets["folder"]["uri"])
    for i, key in enumerate(SPECIAL):
        s3.put_object(Bucket="special", Key="p re+fix/" + key, Body=src.read(i)[0])
    got = ssdfeed.Source("folder:s3://special/p re+fix")
    order = sorted(SPECIAL, key=lambda k: (k.split("/")[0].encode(), k.encode()))
    assert [got.describe(i) for i in range(len(got))] == \
        [f"s3://special/p re+fix/{k}" for k in order]
    classes = sorted({k.split("/")[0].encode() for k in SPECIAL})
    for i, k in enumerate(order):
        data, label = got.read(i)
        assert data == src.read(SPECIAL.index(k))[0]
        assert label == classes.index(k.split("/")[0].encode())


def test_sigv4_matches_botocore(small_datasets):
    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    date = "20250102T030405Z"
    cases = [(key, q, h) for key in ["plain/key.jpg"] + SPECIAL + ["a//b/./c/../d"]
             for q, h in [([], [("Range", "bytes=0-99"), ("If-Match", '"abc"')]),
                          ([("list-type", "2"), ("prefix", key),
                            ("continuation-token", "t/k+n=")], [])]]
    for token in ["", "session+token/="]:
        for key, query, headers in cases:
            path = "/bucket/" + _ssdfeed._s3_uri_encode(key)
            assert path == "/bucket/" + urllib.parse.quote(key, safe="/~")
            qs = urllib.parse.urlencode(query, quote_via=urllib.parse.quote)
            url = "http://127.0.0.1:9000" + path + ("?" + qs if qs else "")
            req = AWSRequest(method="GET", url=url, headers=dict(headers))
            req.context["timestamp"] = date
            auth = S3SigV4Auth(Credentials("AKID", "se/cr+et=", token or None), "s3",
                               "eu-west-3")
            auth._modify_request_before_signing(req)
            auth._set_necessary_date_headers(req)
            canonical = auth.canonical_request(req)
            signature = auth.signature(auth.string_to_sign(req, canonical), req)
            ours = _ssdfeed._s3_sign("GET", "127.0.0.1:9000", path, query, headers, "AKID",
                                     "se/cr+et=", token, "eu-west-3", date)
            assert ours == (canonical, signature), key


def test_retries_through_injected_faults(s3env, bucket, small_datasets):
    """Every request fails twice (a 500 or 503 SlowDown, then a connection
    dropped mid-body) before it passes: every sample still comes out whole."""
    fates = {0: "500", 1: "drop"}
    listings = [True]  # whether listings fail too
    proxy = FaultProxy(int(s3env_port(bucket)),
                       lambda m, t, n: fates.get(n) if listings[0] or "list-type" not in t else None)
    try:
        s3env.setenv("AWS_ENDPOINT_URL", proxy.url)
        for fmt in ("tfrecord", "tar", "folder"):
            local = ssdfeed.Source(small_datasets[fmt]["uri"])
            assert read_all(ssdfeed.Source(S3_URIS[fmt])) == read_all(local), fmt
        assert proxy.injected["500"] > 48 and proxy.injected["drop"] > 48, proxy.injected
        fates[0] = "503"
        proxy.seen.clear()
        assert len(read_all(ssdfeed.Source(S3_URIS["tar"]))) == 48
        assert proxy.injected["503"] > 0
        s3env.setenv("SSDFEED_S3_MAX_ATTEMPTS", "2")
        proxy.seen.clear()
        listings[0] = False
        with pytest.raises(Exception, match=r"s3://data/tar/shard-000000.tar.*gave up after 2"):
            ssdfeed.Source(S3_URIS["tar"])
    finally:
        proxy.close()


def test_stalled_transfer_times_out_and_is_retried(s3env, bucket, small_datasets):
    proxy = FaultProxy(int(s3env_port(bucket)),
                       lambda m, t, n: "stall" if n == 0 and "/folder/" in t else None,
                       stall_s=4)
    try:
        s3env.setenv("AWS_ENDPOINT_URL", proxy.url)
        s3env.setenv("SSDFEED_S3_TIMEOUT_S", "1")
        src = ssdfeed.Source(S3_URIS["folder"])
        local = ssdfeed.Source(small_datasets["folder"]["uri"])
        assert src.read(5) == local.read(5)
        assert proxy.injected["stall"] == 1
    finally:
        proxy.close()


def s3env_port(s3):
    return urllib.parse.urlsplit(s3.meta.endpoint_url).port


def test_missing_keys_and_bucket_are_named(s3env, bucket):
    with pytest.raises(Exception, match=r"no objects match s3://data/tfrecord/nope-\*"):
        ssdfeed.Source(f"tfrecord:s3://{BUCKET}/tfrecord/nope-*.tfrecord")
    with pytest.raises(Exception, match=r"s3://no-such-bucket/.*404"):
        ssdfeed.Source("tar:s3://no-such-bucket/x/*.tar")


def require_signatures(url):
    """From now on moto verifies every request's signature against IAM's keys
    (its reset-auth call sets the count of unchecked requests to zero), so the
    test does not depend on how many requests boto3 happened to spend."""
    req = urllib.request.Request(url + "/moto-api/reset-auth", data=b"0", method="POST",
                                 headers={"Content-Type": "text/plain"})
    no_proxy = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with no_proxy.open(req, timeout=30) as r:
        assert r.status == 200, r.read()


def test_wrong_secret_is_rejected_by_a_checking_server(monkeypatch, small_datasets):
    server = MotoServer()
    try:
        iam = boto3.client("iam", endpoint_url=server.url, region_name="us-east-1",
                           aws_access_key_id="x", aws_secret_access_key="x")
        iam.create_user(UserName="reader")
        iam.put_user_policy(UserName="reader", PolicyName="all", PolicyDocument=(
            '{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"s3:*",'
            '"Resource":"*"}]}'))
        key = iam.create_access_key(UserName="reader")["AccessKey"]
        s3 = client(server.url, AWS_ACCESS_KEY_ID="x", AWS_SECRET_ACCESS_KEY="x")
        s3.create_bucket(Bucket="locked")
        src = ssdfeed.Source(small_datasets["tar"]["uri"])
        shards = src.describe(0).split(" sample ")[0]
        for name in ["a.tar", "b.tar", "c.tar", "d.tar"]:
            s3.upload_file(shards, "locked", "shards/" + name)
        require_signatures(server.url)
        # The control: the server itself now refuses boto3 with a wrong secret.
        wrong = key["SecretAccessKey"][:-1] + "x"
        with pytest.raises(Exception, match="SignatureDoesNotMatch"):
            client(server.url, AWS_ACCESS_KEY_ID=key["AccessKeyId"],
                   AWS_SECRET_ACCESS_KEY=wrong).list_objects_v2(Bucket="locked")
        for k, v in CREDS.items():
            monkeypatch.setenv(k, v)
        monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
        monkeypatch.setenv("AWS_ENDPOINT_URL", server.url)
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", key["AccessKeyId"])
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", key["SecretAccessKey"])
        good = ssdfeed.Source("tar:s3://locked/shards/*.tar")
        assert len(good) == 4 * 20
        assert good.read(3)[0] == src.read(3)[0]
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", wrong)
        with pytest.raises(Exception, match=r"s3://locked/shards/.*403.*access denied"):
            ssdfeed.Source("tar:s3://locked/shards/*.tar")
    finally:
        server.close()


def self_signed_cert(tmp_path):
    """A certificate for 127.0.0.1 that no system store trusts: (cert, key) paths."""
    import datetime
    import ipaddress

    pytest.importorskip("cryptography", reason="cryptography not installed (moto brings it)")
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "ssdfeed test CA")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = tmp_path / "ca.pem", tmp_path / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return str(cert_path), str(key_path)


def test_aws_ca_bundle_is_trusted_as_the_sdks_do(monkeypatch, tmp_path):
    """An https endpoint whose certificate only AWS_CA_BUNDLE vouches for:
    refused without it, listed with it, and a bundle that is not there is
    named."""
    import http.server
    import ssl
    import threading

    cert, key = self_signed_cert(tmp_path)

    class Listing(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = b"<ListBucketResult><IsTruncated>false</IsTruncated></ListBucketResult>"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Listing)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        for k, v in CREDS.items():
            monkeypatch.setenv(k, v)
        for k in ("AWS_SESSION_TOKEN", "AWS_CA_BUNDLE", "SSL_CERT_FILE", "SSL_CERT_DIR"):
            monkeypatch.delenv(k, raising=False)
        monkeypatch.setenv("AWS_ENDPOINT_URL", f"https://127.0.0.1:{server.server_address[1]}")
        monkeypatch.setenv("SSDFEED_S3_MAX_ATTEMPTS", "1")
        uri = "tar:s3://bkt/x/*.tar"
        with pytest.raises(Exception, match=r"(?i)certificate"):
            ssdfeed.Source(uri)
        monkeypatch.setenv("AWS_CA_BUNDLE", cert)
        with pytest.raises(Exception, match=r"no objects match s3://bkt/x/\*\.tar"):
            ssdfeed.Source(uri)
        monkeypatch.setenv("AWS_CA_BUNDLE", str(tmp_path / "missing.pem"))
        with pytest.raises(Exception, match=r"AWS_CA_BUNDLE .*missing\.pem.*no readable file"):
            ssdfeed.Source(uri)
    finally:
        server.shutdown()
        server.server_close()
