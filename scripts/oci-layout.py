#!/usr/bin/env python3
"""Writes an OCI image layout (https://github.com/opencontainers/image-spec, image-layout.md) from a root
filesystem directory, without a registry or a container engine: one uncompressed layer (the directory as a tar,
numeric owners, sorted names, fixed timestamps so the same tree gives the same digest), the image config
(entrypoint, cmd, user, environment) and a manifest named by a tag in index.json. `umoci unpack`, `skopeo copy
oci:DIR:TAG docker://...` and `podman load` read the result.

Usage: scripts/oci-layout.py ROOTFS OUT --tag TAG --entrypoint PATH [--cmd=ARG ...] [--user UID:GID]
Exit status: 0 written, 2 bad input (named).
"""
import argparse
import hashlib
import io
import json
import os
import sys
import tarfile

EPOCH = 0  # every file's mtime in the layer: the digest depends on the content only


def write_blob(out, data):
    digest = hashlib.sha256(data).hexdigest()
    path = os.path.join(out, "blobs", "sha256", digest)
    with open(path, "wb") as f:
        f.write(data)
    return "sha256:" + digest, len(data)


def layer_tar(rootfs):
    """The directory as an uncompressed tar, entries sorted, owners numeric, mtimes EPOCH."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for dirpath, dirnames, filenames in os.walk(rootfs):
            dirnames.sort()
            for name in sorted(dirnames) + sorted(filenames):
                full = os.path.join(dirpath, name)
                rel = os.path.relpath(full, rootfs)
                info = tar.gettarinfo(full, arcname=rel)
                info.mtime = EPOCH
                info.uname = info.gname = ""
                if info.isreg():
                    with open(full, "rb") as f:
                        tar.addfile(info, f)
                else:
                    tar.addfile(info)
    return buf.getvalue()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rootfs")
    parser.add_argument("out")
    parser.add_argument("--tag", required=True)
    parser.add_argument("--entrypoint", required=True)
    parser.add_argument("--cmd", action="append", default=[], help="one argument of the default command; repeat")
    parser.add_argument("--user", default="")
    args = parser.parse_args()
    if not os.path.isdir(args.rootfs):
        print(f"oci-layout: {args.rootfs}: not a directory", file=sys.stderr)
        return 2
    if not os.path.isfile(os.path.join(args.rootfs, args.entrypoint.lstrip("/"))):
        print(f"oci-layout: the entrypoint {args.entrypoint} is not a file in {args.rootfs}", file=sys.stderr)
        return 2
    os.makedirs(os.path.join(args.out, "blobs", "sha256"), exist_ok=True)
    layer = layer_tar(args.rootfs)
    layer_digest, layer_size = write_blob(args.out, layer)
    config = {
        "architecture": "amd64",
        "os": "linux",
        "config": {
            "Entrypoint": [args.entrypoint],
            "Cmd": args.cmd,
            "User": args.user,
            "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
        },
        # The layer is uncompressed, so its diff ID is its digest.
        "rootfs": {"type": "layers", "diff_ids": [layer_digest]},
        "history": [{"created_by": "scripts/oci-layout.py"}],
    }
    config_digest, config_size = write_blob(args.out, json.dumps(config, sort_keys=True).encode())
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config_digest,
                   "size": config_size},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": layer_digest,
                    "size": layer_size}],
    }
    manifest_digest, manifest_size = write_blob(args.out, json.dumps(manifest, sort_keys=True).encode())
    index = {
        "schemaVersion": 2,
        "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": manifest_digest,
                       "size": manifest_size, "annotations": {"org.opencontainers.image.ref.name": args.tag}}],
    }
    with open(os.path.join(args.out, "index.json"), "w") as f:
        json.dump(index, f, sort_keys=True)
    with open(os.path.join(args.out, "oci-layout"), "w") as f:
        json.dump({"imageLayoutVersion": "1.0.0"}, f)
    print(f"oci-layout: {args.out}:{args.tag} manifest {manifest_digest}, one layer of {layer_size >> 20} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
