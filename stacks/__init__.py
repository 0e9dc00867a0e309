"""The Pulumi program of Myriad: machines for the cluster that a stack's cluster.yaml describes.

`program.build(spec, settings)` is the whole program; `__main__` only reads the stack's config
and exports what `build` returns, so tests run `build` under `pulumi.runtime.set_mocks`.
"""
