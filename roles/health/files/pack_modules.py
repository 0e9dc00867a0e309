"""Pack the runner's modules into one zip that Python imports from (zipimport, standard
library), on the control node: one file to copy to each node instead of one per module.

    pack_modules.py SOURCE_DIR DEST MODULE_OR_FOLDER...

SOURCE_DIR is the myriad package; a folder stands for its *.py files. The zip is the same
bytes for the same sources (sorted, fixed timestamps), so copying it again changes nothing.
"""

import os
import sys
import tempfile
import zipfile


def members(source, items):
    names = []
    for item in items:
        path = os.path.join(source, item)
        if os.path.isdir(path):
            names += [os.path.join(item, n) for n in os.listdir(path) if n.endswith(".py")]
        else:
            names.append(item)
    return sorted(set(names))


def main():
    source, dest, items = sys.argv[1], sys.argv[2], sys.argv[3:]
    folder = os.path.dirname(os.path.abspath(dest))
    os.makedirs(folder, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=folder, suffix=".zip")
    os.close(handle)
    with zipfile.ZipFile(temporary, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in members(source, items):
            info = zipfile.ZipInfo("myriad/" + name.replace(os.sep, "/"), (1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            with open(os.path.join(source, name), "rb") as module:
                archive.writestr(info, module.read())
    os.replace(temporary, dest)


if __name__ == "__main__":
    main()
