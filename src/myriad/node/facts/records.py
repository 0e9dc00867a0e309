"""What Myriad itself left on the node: the image-mode record and myriad-health's state."""

from __future__ import annotations

from myriad.node.facts.declare import file, json_fact

HEALTH_STATE_FILE = "/var/lib/myriad-health/state.json"

# /etc/myriad/image.json: the baked image the node was started from (image mode).
IMAGE_RECORD = json_fact(
    "image_record",
    file("image_record", "/etc/myriad/image.json"),
    "/etc/myriad/image.json",
    "the image record",
)
# The node health runner's state file, as it last wrote it (`myriad health` reads it).
HEALTH_STATE = json_fact(
    "health_state",
    file("health_state", HEALTH_STATE_FILE),
    "myriad-health state",
    "myriad-health state",
)
