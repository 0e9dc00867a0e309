"""The commands that compose the layers below: `myriad up` and `myriad bringup`.

`up` is bring-up (`myriad.bringup`), then image mode's rollout (`myriad.ops.image_roll`),
then validation once Slurm has settled (`myriad.validate`, `myriad.ops.slurm`); both write
node health's documents first (`myriad.health.render`). It sits above all of them, so none
of them is handed another as a callable, and each returns a result the views draw.
"""
