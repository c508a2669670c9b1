"""The component package's host: Pulumi runs this (PulumiPlugin.yaml) when a program in any
language uses the package (`pulumi package add <this repository>`; docs/pulumi-package.md)."""

from pulumi.provider.experimental import component_provider_host

from exactly_once.components.package import COMPONENTS, NAME, VERSION

if __name__ == "__main__":
    component_provider_host(COMPONENTS, name=NAME, version=VERSION)
