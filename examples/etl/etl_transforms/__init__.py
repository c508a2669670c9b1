"""Example transforms for the idempotent ETL, each bundled into the function as a user's
own code would be: `transform_source="examples/etl"`,
`transform="etl_transforms.<module>:transform"`.

A transform is `transform(source, obj) -> Iterable[bytes]`: it reads the input object
version from the binary stream `source`, yields the output in chunks (so memory stays
bounded), and raises `handlers.errors.BadInput` for an input no retry can fix.
"""
