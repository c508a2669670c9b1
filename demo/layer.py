"""A demo Lambda layer of one module, for the e2e test that a function's layers
(`platform.functions[...].layers`) reach the deployed function.

Demo support, built only by a stack that asks for it (`demoLayerFunction`): a team brings
its own layers by ARN; no handler imports this one."""

from __future__ import annotations

import os
import tempfile
import zipfile

import pulumi
import pulumi_aws as aws

from exactly_once.components.functions import RUNTIME
from exactly_once.components.lambda_asset import FIXED_TIME, build_dir

# Lambda puts a Python layer's python/ folder on sys.path (Lambda developer guide,
# "Packaging your layer content").
MODULE = "python/demo_layer.py"


def demo_layer(name: str, opts: pulumi.ResourceOptions | None = None) -> aws.lambda_.LayerVersion:
    """A layer version named `name`; its zip is the same bytes on every build (fixed
    timestamps), so an unchanged layer shows no diff."""
    out = build_dir() / f"{name}.zip"
    out.parent.mkdir(parents=True, exist_ok=True)
    # written beside and renamed: builds running at once never read a half-written zip
    handle, staging = tempfile.mkstemp(prefix=f"{out.stem}.", suffix=".tmp", dir=out.parent)
    with os.fdopen(handle, "wb") as file, zipfile.ZipFile(file, "w") as archive:
        archive.writestr(zipfile.ZipInfo(MODULE, FIXED_TIME), 'LAYER = "demo"\n')
    os.replace(staging, out)
    return aws.lambda_.LayerVersion(
        name,
        layer_name=name,
        code=pulumi.FileArchive(str(out)),
        compatible_runtimes=[RUNTIME],
        opts=opts,
    )
