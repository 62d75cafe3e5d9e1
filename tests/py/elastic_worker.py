"""One rank of a job for test_elastic.py, run in its own process.

argv[1]: JSON config. Reads `stop` batches (all when null), then writes the
sha1 of every sample it served, its state_dict() and len(loader) to `out`.
"""

import hashlib
import json
import sys


def open_loader(cfg):
    import ssdfeed

    kw = dict(cache=False, prepare=ssdfeed.Prepare(resize=(8, 8)), batch_size=cfg["batch_size"],
              shuffle=True, seed=cfg["seed"], rank=cfg["rank"], world_size=cfg["world_size"],
              workers=2, shard=cfg["shard"], rotate_every=2, on_error=cfg["on_error"])
    if cfg["adapter"] == "torch":
        from ssdfeed.torch import Loader

        loader = Loader(cfg["src"], **kw)
        load_state(cfg, loader)
        return loader, lambda: ((i.numpy(), y.numpy()) for i, y in loader)
    loader = ssdfeed.Loader(cfg["src"], **kw)
    load_state(cfg, loader)
    if cfg["adapter"] == "tf":
        import ssdfeed.tf

        # The state goes into the loader before the dataset is made, as
        # docs/python.md says: the dataset then knows its first pass is short.
        ds = ssdfeed.tf.dataset(loader=loader)
        return loader, lambda: ((i.numpy(), y.numpy()) for i, y in ds)
    return loader, lambda: iter(loader)


def load_state(cfg, loader):
    if cfg.get("state"):
        with open(cfg["state"]) as f:
            loader.load_state_dict(json.load(f))


def main():
    cfg = json.loads(sys.argv[1])
    loader, batches = open_loader(cfg)
    length, seen, sizes = len(loader), [], []
    for images, _ in batches() if cfg["stop"] != 0 else ():
        seen += [hashlib.sha1(x.tobytes()).hexdigest() for x in images]
        sizes.append(len(images))
        if len(sizes) == cfg["stop"]:
            break
    with open(cfg["out"], "w") as f:
        json.dump({"seen": seen, "sizes": sizes, "len": length, "state": loader.state_dict()}, f)


if __name__ == "__main__":
    main()
