"""The component package's host: Pulumi runs this (PulumiPlugin.yaml) when a program in any
language uses the package (`pulumi package add <this repository>`; docs/pulumi-package.md)."""

import sys

from exactly_once.components.package import serve

if __name__ == "__main__":
    serve(sys.argv[1:])
