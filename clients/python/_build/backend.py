"""A PEP 517 build backend with no dependencies, so that
``pip install ./clients/python`` works offline: it builds a pure-Python
wheel (and an sdist) of the ``artifactd`` package with the standard
library only. Metadata comes from pyproject.toml's [project] table."""

from __future__ import annotations

import base64
import hashlib
import io
import os
import tarfile
import zipfile
from typing import Any, Dict, List, Optional, Tuple

try:
    import tomllib  # Python 3.11+
except ImportError:  # pragma: no cover - 3.9 and 3.10
    tomllib = None  # type: ignore[assignment]

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "artifactd"


def _project() -> Dict[str, Any]:
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        raw = f.read()
    if tomllib is not None:
        return tomllib.loads(raw.decode("utf-8"))["project"]
    # Enough of TOML for our own file: key = "string" lines under [project].
    proj: Dict[str, Any] = {}
    section = ""
    for line in raw.decode("utf-8").splitlines():
        line = line.strip()
        if line.startswith("["):
            section = line.strip("[]")
        elif section == "project" and "=" in line:
            k, v = (x.strip() for x in line.split("=", 1))
            if v.startswith('"'):
                proj[k] = v.strip('"')
    return proj


def _dist_name(proj: Dict[str, Any]) -> str:
    return proj["name"].replace("-", "_")


def _metadata(proj: Dict[str, Any]) -> str:
    lines = ["Metadata-Version: 2.1", f"Name: {proj['name']}", f"Version: {proj['version']}",
             f"Summary: {proj.get('description', '')}", "License: Apache-2.0"]
    if proj.get("requires-python"):
        lines.append(f"Requires-Python: {proj['requires-python']}")
    readme = os.path.join(ROOT, "README.md")
    body = ""
    if os.path.exists(readme):
        lines.append("Description-Content-Type: text/markdown")
        with open(readme, encoding="utf-8") as f:
            body = f.read()
    return "\n".join(lines) + "\n\n" + body


def _package_files() -> List[Tuple[str, bytes]]:
    out = []
    base = os.path.join(ROOT, PACKAGE)
    for name in sorted(os.listdir(base)):
        if name.endswith(".py") or name == "py.typed":
            with open(os.path.join(base, name), "rb") as f:
                out.append((f"{PACKAGE}/{name}", f.read()))
    return out


def _record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def get_requires_for_build_wheel(config_settings: Optional[Dict[str, Any]] = None) -> List[str]:
    return []


def get_requires_for_build_sdist(config_settings: Optional[Dict[str, Any]] = None) -> List[str]:
    return []


def build_wheel(wheel_directory: str, config_settings: Optional[Dict[str, Any]] = None,
                metadata_directory: Optional[str] = None) -> str:
    proj = _project()
    dist = _dist_name(proj)
    info = f"{dist}-{proj['version']}.dist-info"
    files = _package_files() + [
        (f"{info}/METADATA", _metadata(proj).encode("utf-8")),
        (f"{info}/WHEEL", b"Wheel-Version: 1.0\nGenerator: artifactd-backend\nRoot-Is-Purelib: true\nTag: py3-none-any\n"),
    ]
    record = "\n".join([_record_line(p, d) for p, d in files] + [f"{info}/RECORD,,"]) + "\n"
    files.append((f"{info}/RECORD", record.encode("utf-8")))
    name = f"{dist}-{proj['version']}-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for path, data in files:
            zi = zipfile.ZipInfo(path, date_time=(2020, 1, 1, 0, 0, 0))
            zi.external_attr = 0o644 << 16
            z.writestr(zi, data, zipfile.ZIP_DEFLATED)
    return name


def build_sdist(sdist_directory: str, config_settings: Optional[Dict[str, Any]] = None) -> str:
    proj = _project()
    base = f"{_dist_name(proj)}-{proj['version']}"
    name = base + ".tar.gz"
    members = [("pyproject.toml", None), ("README.md", None), ("_build/backend.py", None)]
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as tar:
        for rel, _ in members:
            tar.add(os.path.join(ROOT, rel), arcname=f"{base}/{rel}")
        for path, data in _package_files():
            ti = tarfile.TarInfo(f"{base}/{path}")
            ti.size = len(data)
            ti.mode = 0o644
            tar.addfile(ti, io.BytesIO(data))
        pkg_info = _metadata(proj).encode("utf-8")
        ti = tarfile.TarInfo(f"{base}/PKG-INFO")
        ti.size = len(pkg_info)
        tar.addfile(ti, io.BytesIO(pkg_info))
    return name
