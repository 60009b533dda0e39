"""The downloader against a local HTTP server on 127.0.0.1: success, mismatch, truncation, mirrors."""
import hashlib
import io
import os
import tarfile
import threading
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from lmcourse.corpora import data, download
from lmcourse.corpora.download import ChecksumError, DownloadError, Remote


def sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


BODY = b"the cat sat on the mat\n" * 500
OTHER = b"a different file\n" * 40


def make_zip(members: dict) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, content in members.items():
            z.writestr(name, content)
    return buf.getvalue()


def make_tgz(members: dict) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        for name, content in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(content)
            t.addfile(info, io.BytesIO(content))
    return buf.getvalue()


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        server = self.server
        server.hits.append(self.path)
        server.agents.append(self.headers.get("User-Agent", ""))
        route = server.routes.get(self.path)
        if route is None:
            self.send_error(404)
            return
        kind, body = route
        self.send_response(200)
        # "truncate": announce more bytes than are sent, then close the connection.
        self.send_header("Content-Length", str(len(body) + (1000 if kind == "truncate" else 0)))
        self.end_headers()
        self.wfile.write(body)
        self.close_connection = True

    def log_message(self, *args):
        pass


@pytest.fixture
def server(monkeypatch):
    monkeypatch.setattr(download, "TIMEOUT_S", 5)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    httpd.routes, httpd.hits, httpd.agents = {}, [], []
    httpd.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()
    thread.join(timeout=5)


def listing(folder):
    """The files left in a folder."""
    return sorted(p.name for p in folder.iterdir())


def test_success_writes_the_exact_bytes(server, tmp_path):
    server.routes["/f.txt"] = ("ok", BODY)
    dest = download.download([server.url + "/f.txt"], tmp_path / "d" / "f.txt", sha(BODY), progress=False)
    assert dest.read_bytes() == BODY
    assert listing(tmp_path / "d") == ["f.txt"]
    assert "Mozilla" in server.agents[0]  # some mirrors refuse urllib's own User-Agent


def test_checksum_mismatch_names_file_and_hashes_and_leaves_nothing(server, tmp_path):
    server.routes["/f.txt"] = ("ok", OTHER)
    with pytest.raises(ChecksumError) as err:
        download.download([server.url + "/f.txt"], tmp_path / "f.txt", sha(BODY), progress=False)
    msg = str(err.value)
    assert "f.txt" in msg and sha(BODY) in msg and sha(OTHER) in msg
    assert listing(tmp_path) == []


def test_truncated_transfer_is_an_error_and_leaves_nothing(server, tmp_path):
    server.routes["/f.txt"] = ("truncate", BODY)
    with pytest.raises(DownloadError, match="cut short") as err:
        download.download([server.url + "/f.txt"], tmp_path / "f.txt", sha(BODY), progress=False)
    assert not isinstance(err.value, ChecksumError)
    assert listing(tmp_path) == []


def test_unreachable_host_suggests_the_offline_corpus(closed_url, tmp_path):
    with pytest.raises(DownloadError) as err:
        download.download([closed_url], tmp_path / "f.txt", sha(BODY), progress=False)
    msg = str(err.value)
    assert "could not connect" in msg and "load_corpus()" in msg and "LMCOURSE_DATA" in msg
    assert listing(tmp_path) == []


def test_falls_back_to_the_next_mirror(server, tmp_path):
    server.routes["/good.txt"] = ("ok", BODY)
    urls = [server.url + "/gone.txt", server.url + "/good.txt"]
    assert download.download(urls, tmp_path / "f.txt", sha(BODY), progress=False).read_bytes() == BODY
    assert server.hits == ["/gone.txt", "/good.txt"]


def test_all_mirrors_failing_reports_each(server, tmp_path, closed_url):
    server.routes["/bad.txt"] = ("ok", OTHER)
    with pytest.raises(DownloadError) as err:
        download.download([server.url + "/nope.txt", server.url + "/bad.txt", closed_url],
                          tmp_path / "f.txt", sha(BODY), progress=False)
    msg = str(err.value)
    assert "HTTP 404" in msg and "checksum mismatch" in msg and "could not connect" in msg
    assert listing(tmp_path) == []


def test_archive_members_are_extracted_and_the_archive_fetched_once(server, tmp_path):
    members = {"wikitext-2/wiki.train.tokens": BODY, "wikitext-2/wiki.valid.tokens": OTHER}
    server.routes["/c.zip"] = ("ok", make_zip(members))
    files = {"train.txt": Remote(sha(BODY), ((server.url + "/c.zip", "wiki.train.tokens"),)),
             "valid.txt": Remote(sha(OTHER), ((server.url + "/c.zip", "wiki.valid.tokens"),))}
    download.fetch(files, tmp_path / "wt", progress=False)
    assert (tmp_path / "wt/train.txt").read_bytes() == BODY and (tmp_path / "wt/valid.txt").read_bytes() == OTHER
    assert server.hits == ["/c.zip"]
    assert listing(tmp_path / "wt") == ["train.txt", "valid.txt"]


def test_tar_archive_and_missing_member(server, tmp_path):
    server.routes["/s.tgz"] = ("ok", make_tgz({"./simple/data/ptb.test.txt": BODY}))
    got = download.download([(server.url + "/s.tgz", "ptb.test.txt")], tmp_path / "test.txt", sha(BODY), progress=False)
    assert got.read_bytes() == BODY
    with pytest.raises(DownloadError, match="holds no ptb.train.txt"):
        download.download([(server.url + "/s.tgz", "ptb.train.txt")], tmp_path / "train.txt", sha(BODY),
                          progress=False)
    assert listing(tmp_path) == ["test.txt"]


def test_verified_folder_needs_no_network(tmp_path, closed_url):
    folder = tmp_path / "c"
    folder.mkdir()
    texts = {"train.txt": b"a b\n", "valid.txt": b"b a\n", "test.txt": b"a\n"}
    for name, b in texts.items():
        (folder / name).write_bytes(b)
    files = {name: Remote(sha(b), (closed_url,)) for name, b in texts.items()}
    assert download.fetch(files, folder, progress=False) == folder
    assert listing(folder) == sorted(texts)  # nothing added: no stamp, no temporary file
    assert data.load_corpus(folder).vocab.itos == ["a", "b", "<eos>", "<unk>"]


def test_every_use_rehashes_so_an_edit_hidden_by_touch_is_caught(tmp_path):
    path = tmp_path / "f.txt"
    path.write_bytes(BODY)
    os.utime(path, ns=(10**18, 10**18))
    assert download.is_verified(path, sha(BODY))
    flipped = bytearray(BODY)
    flipped[100] ^= 1
    path.write_bytes(bytes(flipped))  # one bit changed; size and modification time restored
    os.utime(path, ns=(10**18, 10**18))
    assert not download.is_verified(path, sha(BODY))
    with pytest.raises(ChecksumError, match="delete it"):
        download.download(["http://127.0.0.1:9/unused"], path, sha(BODY), progress=False)
    assert path.read_bytes() == bytes(flipped) and listing(tmp_path) == ["f.txt"]


def test_an_upper_case_digest_is_the_same_digest(server, tmp_path):
    server.routes["/f.txt"] = ("ok", BODY)
    dest = download.download([server.url + "/f.txt"], tmp_path / "f.txt", sha(BODY).upper(), progress=False)
    assert dest.read_bytes() == BODY and download.is_verified(dest, sha(BODY).upper())
    assert download.fetch({"f.txt": Remote(sha(BODY).upper(), (server.url + "/f.txt",))}, tmp_path,
                          progress=False) == tmp_path
    assert server.hits == ["/f.txt"]  # the file on disk was accepted without a download
    with pytest.raises(ValueError, match="not a sha256 digest"):
        download.download([server.url + "/f.txt"], tmp_path / "g.txt", "xyz", progress=False)


def test_ctrl_c_during_an_archive_download_leaves_no_partial_file(server, tmp_path, monkeypatch):
    server.routes["/c.zip"] = ("ok", make_zip({"wiki.train.tokens": BODY}))
    real_stream = download._stream

    def interrupted(url, out, progress):
        real_stream(url, out, progress)  # the archive is partly on disk when Ctrl-C comes
        raise KeyboardInterrupt

    monkeypatch.setattr(download, "_stream", interrupted)
    files = {"train.txt": Remote(sha(BODY), ((server.url + "/c.zip", "wiki.train.tokens"),))}
    with pytest.raises(KeyboardInterrupt):
        download.fetch(files, tmp_path / "wt", progress=False)
    assert list(tmp_path.rglob("*")) == []  # no partial archive, and not even the folder made for it
    monkeypatch.setattr(download, "_stream", real_stream)
    download.fetch(files, tmp_path / "wt", progress=False)
    assert listing(tmp_path / "wt") == ["train.txt"]


def test_bad_url_list_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="empty"):
        download.download([], tmp_path / "f.txt", sha(BODY))
    with pytest.raises(TypeError, match="URL string"):
        download.download([42], tmp_path / "f.txt", sha(BODY))


def test_load_corpus_downloads_a_missing_corpus_then_reuses_it(server, tmp_path, monkeypatch, closed_url):
    text = b"First Citizen:\nBefore we proceed any further, hear me speak.\n" * 40
    server.routes["/input.txt"] = ("ok", text)
    monkeypatch.setitem(download.SOURCES, "tinyshakespeare",
                        {"input.txt": Remote(sha(text), (server.url + "/input.txt",))})
    monkeypatch.setenv("CI", "1")  # no progress bar
    corpus = data.load_corpus("tinyshakespeare", level="char", data_dir=tmp_path)
    assert (tmp_path / "tinyshakespeare/input.txt").read_bytes() == text
    assert corpus.vocab.to_text(corpus.train) + corpus.vocab.to_text(corpus.valid) \
        + corpus.vocab.to_text(corpus.test) == text.decode()
    monkeypatch.setitem(download.SOURCES, "tinyshakespeare", {"input.txt": Remote(sha(text), (closed_url,))})
    again = data.load_corpus("tinyshakespeare", level="char", data_dir=tmp_path)
    assert again.vocab == corpus.vocab and server.hits == ["/input.txt"]
