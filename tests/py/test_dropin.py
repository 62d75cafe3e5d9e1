"""ssdfeed as a drop-in for DataLoader and image_dataset_from_directory:
each test runs the user's code path (a pytorch/examples or Keras tutorial
line) and checks what that code relies on."""

import json
import logging
import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import ssdfeed

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


@pytest.fixture(scope="module")
def folder45(tmp_path_factory):
    """An ImageFolder tree of 45 images (45 splits unevenly over 2 ranks,
    as ImageNet's 50,000 do over 3), one per class: a label is its id."""
    from PIL import Image
    d = tmp_path_factory.mktemp("folder45")
    rng = np.random.default_rng(5)
    for i in range(45):
        os.makedirs(d / f"c{i:02d}")
        h, w = rng.integers(40, 72, 2)
        Image.fromarray(rng.integers(0, 255, (h, w, 3), dtype=np.uint8)).save(
            d / f"c{i:02d}" / "img.jpg", quality=90)
    return f"folder:{d}"


SMALL = dict(prepare=ssdfeed.Prepare(resize=(16, 16)), workers=2)


def _labels_of(loader):
    return [int(y) for _, labels in loader for y in labels]


# -- 1: pin_memory on a CPU-only torch ---------------------------------------

def test_pin_memory_true_without_cuda_warns_and_serves(folder45):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("torch has CUDA here: pin_memory=True pins for real")
    import ssdfeed.torch as sft
    with pytest.warns(UserWarning, match="no CUDA device"):
        loader = sft.Loader(folder45, batch_size=8, pin_memory=True, **SMALL)
    assert not loader.pin_memory
    assert sum(len(y) for _, y in loader) == 45  # used to fail at the first batch


# -- 3, 4, 5 and the docs: the ImageNet example's loaders under torchrun -------

IMAGENET = textwrap.dedent('''
    import json, os, re, sys
    import torch.distributed as dist
    import ssdfeed
    import ssdfeed.torch

    data, out, doc = sys.argv[1], sys.argv[2], open(sys.argv[3]).read()
    blocks = dict(re.findall(r"<!-- test: (\\S+) -->\\n```python\\n(.*?)```", doc, re.S))

    class args:  # the example's argparse namespace, as torchrun sets it up
        batch_size, workers = 4, 2
        world_size = int(os.environ["WORLD_SIZE"])
        distributed = world_size > 1
    traindir = valdir = data
    ns = dict(ssdfeed=ssdfeed, args=args, traindir=traindir, valdir=valdir)
    # The loaders are made before init_process_group, as scripts that build
    # their data first do: torchrun's RANK/WORLD_SIZE must still split them.
    exec(blocks["imagenet-loaders"], ns)
    train_loader, val_loader, train_sampler = (ns["train_loader"], ns["val_loader"],
                                               ns["train_sampler"])
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    epochs = []
    for epoch in range(2):
        if args.distributed:
            train_sampler.set_epoch(epoch)
        epochs.append([int(y) for _, labels in train_loader for y in labels])
    val_ids = [int(y) for _, labels in val_loader for y in labels]
    aux_ids = []
    ns["run_validate"] = lambda loader, base: aux_ids.extend(
        int(y) for _, labels in loader for y in labels)
    exec(blocks["imagenet-aux"], ns)
    ds = val_loader.dataset
    json.dump({"rank": rank, "train": epochs, "val": val_ids, "aux": aux_ids,
               "sampler_len": len(val_loader.sampler), "dataset_len": len(ds),
               "classes": ds.classes, "class_to_idx": ds.class_to_idx,
               "samples": ds.samples, "train_len": len(train_sampler)},
              open(f"{out}/rank{rank}.json", "w"))
    dist.destroy_process_group()
''')


def _torchrun(script, args, tmp_path, nproc=2, env=None):
    e = {**os.environ, **(env or {}), "OMP_NUM_THREADS": "1"}
    # --local-addr: in a container whose hostname does not resolve (buildah's
    # chroot, some CI runners) torchrun's rendezvous on the hostname hangs.
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                        "--local-addr=127.0.0.1", f"--nproc_per_node={nproc}", str(script),
                        *args],
                       capture_output=True, text=True, timeout=300, env=e, cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return r


@pytest.mark.torchrun
def test_imagenet_example_loaders_under_torchrun(folder45, tmp_path):
    pytest.importorskip("torch")
    script = tmp_path / "imagenet_loaders.py"
    script.write_text(IMAGENET)
    out = tmp_path / "out"
    out.mkdir()
    _torchrun(script, [folder45, str(out), os.path.join(REPO, "docs", "migrating.md")],
              tmp_path)
    ranks = [json.loads((out / f"rank{r}.json").read_text()) for r in range(2)]
    n = 45
    # 3: made before init_process_group, the loaders still split the epoch.
    for epoch in range(2):
        a, b = (set(r["train"][epoch]) for r in ranks)
        assert len(ranks[0]["train"][epoch]) == len(ranks[1]["train"][epoch]) == 23
        assert a | b == set(range(n))  # one sample padded, as DistributedSampler
    assert ranks[0]["train"][0] != ranks[0]["train"][1], "set_epoch did not reshuffle"
    # 4, 5: exact distributed validation: 22 per rank (sampler drop_last),
    # the short last batch kept (DataLoader drop_last=False), the tail
    # evaluated by the aux loader, every sample exactly once.
    for r in ranks:
        assert r["sampler_len"] == 22 and r["dataset_len"] == n and r["train_len"] == 23
        assert r["aux"] == [44]
    assert sorted(ranks[0]["val"] + ranks[1]["val"] + ranks[0]["aux"]) == list(range(n))
    # 4: ImageFolder's attributes.
    classes = sorted(os.listdir(folder45.split(":", 1)[1]))
    r = ranks[0]
    assert r["classes"] == classes and r["class_to_idx"] == {c: i for i, c in enumerate(classes)}
    assert len(r["samples"]) == n
    for path, label in r["samples"]:
        assert os.path.isfile(path) and os.path.basename(os.path.dirname(path)) == classes[label]


REFUSE_OR_SPLIT = textwrap.dedent('''
    import json, os, sys
    import ssdfeed.torch
    loader = ssdfeed.torch.Loader(sys.argv[1], batch_size=5, seed=1, shuffle=True,
                                  prepare=__import__("ssdfeed").Prepare(resize=(8, 8)))
    ids = [int(y) for _, labels in loader for y in labels]
    json.dump({"ids": ids, "workers": loader.num_workers},
              open(f"{sys.argv[2]}/{os.environ['RANK']}.json", "w"))
''')


@pytest.mark.torchrun
def test_torchrun_without_a_process_group_splits_and_shares_cpus(folder45, tmp_path):
    """No init_process_group at all: RANK/WORLD_SIZE still split the
    dataset, and LOCAL_WORLD_SIZE shares the node's CPUs between ranks."""
    torch = pytest.importorskip("torch")
    import ssdfeed.torch as sft
    script = tmp_path / "plain.py"
    script.write_text(REFUSE_OR_SPLIT)
    _torchrun(script, [folder45, str(tmp_path)], tmp_path)
    a, b = (json.loads((tmp_path / f"{r}.json").read_text()) for r in range(2))
    assert len(a["ids"]) == len(b["ids"]) == 23 and set(a["ids"]) | set(b["ids"]) == set(range(45))
    share = max(1, ssdfeed._ssdfeed.default_workers() // 2)
    assert a["workers"] == b["workers"] == share
    del torch, sft


def test_numpy_loader_under_torchrun_env_warns_it_serves_everything(folder45, monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.warns(UserWarning, match="serves this rank the whole dataset"):
        ssdfeed.Loader(folder45, **SMALL)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ssdfeed.Loader(folder45, rank=0, world_size=1, **SMALL)  # the aux loader's choice


# -- 5: the two drop_last ------------------------------------------------------

def test_drop_last_and_sampler_drop_last_are_separate(folder45):
    counts = {}
    for kw in (dict(), dict(drop_last=True), dict(sampler_drop_last=True),
               dict(drop_last=True, sampler_drop_last=True)):
        loader = ssdfeed.Loader(folder45, batch_size=4, rank=1, world_size=2, **kw, **SMALL)
        sizes = [len(y) for _, y in loader]
        counts[tuple(sorted(kw))] = (sum(sizes), sizes[-1], len(loader), loader.num_samples)
    assert counts[()] == (23, 3, 6, 23)  # padded to 23, short last batch kept
    assert counts[("drop_last",)] == (20, 4, 5, 23)  # only the short batch goes
    assert counts[("sampler_drop_last",)] == (22, 2, 6, 22)  # only the tail goes
    assert counts[("drop_last", "sampler_drop_last")] == (20, 4, 5, 22)


# -- 6: Keras ------------------------------------------------------------------

def test_tf_float_output_is_keras_0_255_and_checks_mean_std(folder45):
    pytest.importorskip("tensorflow")
    import ssdfeed.tf as sftf
    u8 = np.concatenate([x.numpy() for x, _ in sftf.dataset(folder45, batch_size=9, **SMALL)])
    f = np.concatenate([x.numpy() for x, _ in sftf.dataset(folder45, batch_size=9,
                                                            dtype="float32", **SMALL)])
    assert f.max() > 100  # Keras' scale: a script's Rescaling(1/255) stays right
    np.testing.assert_allclose(f, u8.astype(np.float32), atol=1e-3)
    unit = np.concatenate([x for x, _ in ssdfeed.Loader(folder45, batch_size=9, dtype="float32",
                                                        **SMALL)])
    np.testing.assert_allclose(unit, u8 / 255.0, atol=1e-6)
    norm = sftf.dataset(folder45, batch_size=45, dtype="float32", mean=[127.5], std=[127.5],
                        **SMALL)
    x = next(iter(norm))[0].numpy()
    np.testing.assert_allclose(x, (u8.astype(np.float32) - 127.5) / 127.5, atol=1e-4)
    with pytest.raises(ValueError, match="look like \\[0, 1\\] values"):
        sftf.dataset(folder45, dtype="float32", mean=[0.485, 0.456, 0.406],
                     std=[0.229, 0.224, 0.225], **SMALL)
    with pytest.raises(ValueError, match="look like 0-255 pixel values"):
        ssdfeed.Loader(folder45, dtype="float32", mean=[123.7, 116.3, 103.5], std=[58.4],
                       **SMALL)
    with pytest.raises(ValueError, match="scale applies only to float"):
        ssdfeed.Loader(folder45, scale=255, **SMALL)


def test_validation_split_is_random_disjoint_and_seeded(folder45):
    kw = dict(validation_split=0.2, seed=7, batch_size=4, **SMALL)
    train = _labels_of_ids(ssdfeed.Loader(folder45, subset="training", **kw))
    val = _labels_of_ids(ssdfeed.Loader(folder45, subset="validation", **kw))
    assert len(val) == 9 and len(train) == 36  # floor(0.2 * 45), as Keras
    assert set(train).isdisjoint(val) and set(train) | set(val) == set(range(45))
    other = _labels_of_ids(ssdfeed.Loader(folder45, subset="validation",
                                          **{**kw, "seed": 8}))
    assert set(other) != set(val)
    for bad, words in ((dict(subset="training"), "needs validation_split"),
                       (dict(validation_split=0.2, subset="test"), "must be 'training'"),
                       (dict(validation_split=0.2, subset="both"), "two datasets"),
                       (dict(validation_split=1.5, subset="training"), "in \\(0, 1\\)")):
        with pytest.raises(ValueError, match=words):
            ssdfeed.Loader(folder45, **bad, **SMALL)


def _labels_of_ids(loader):
    """The source ids a loader serves; checks that the labels it serves are
    theirs (folder labels are classes, so ids come from the split itself)."""
    from ssdfeed import _compat
    ids = list(_compat.served_ids(loader._options, loader._impl.source_size()))
    src = ssdfeed.Source(loader.source)
    assert sorted(_labels_of(loader)) == sorted(src.read(i)[1] for i in ids)
    return ids


def test_validation_split_keeps_every_class_in_both_parts(small_datasets):
    uri = small_datasets["folder"]["uri"]  # 48 images, 4 classes, ids sorted by class
    for subset in ("training", "validation"):
        loader = ssdfeed.Loader(uri, validation_split=0.25, subset=subset, seed=1,
                                batch_size=48, **SMALL)
        # A range split would give the validation part class 3 alone.
        assert sorted(set(_labels_of(loader))) == [0, 1, 2, 3]


def test_torch_split_needs_a_seed_and_tf_gives_both(folder45):
    pytest.importorskip("torch")
    import ssdfeed.torch as sft
    with pytest.raises(ValueError, match="validation_split needs seed="):
        sft.Loader(folder45, validation_split=0.2, subset="training", **SMALL)
    loader = sft.Loader(folder45, validation_split=0.2, subset="validation", seed=3, **SMALL)
    assert len(loader.dataset) == 9 and len(loader.sampler) == 9
    pytest.importorskip("tensorflow")
    import ssdfeed.tf as sftf
    train, val = sftf.dataset(folder45, validation_split=0.2, subset="both", seed=3,
                              batch_size=4, **SMALL)
    assert sum(len(y) for _, y in val) == 9 and sum(len(y) for _, y in train) == 36
    assert train.class_names == val.class_names == sorted(os.listdir(folder45[7:]))


KERAS = dict(batch_size=8, shuffle=True, seed=2, **SMALL)


def test_keras_fit_knows_the_epoch_length_from_the_first_epoch(folder45):
    tf = pytest.importorskip("tensorflow")
    import ssdfeed.tf as sftf
    ds = sftf.dataset(folder45, dtype="float32", **KERAS)
    assert int(ds.cardinality()) == 6
    model = tf.keras.Sequential([tf.keras.Input((16, 16, 3)), tf.keras.layers.Rescaling(1 / 255),
                                 tf.keras.layers.GlobalAveragePooling2D(),
                                 tf.keras.layers.Dense(45)])
    model.compile("sgd", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        hist = model.fit(ds, epochs=3, verbose=0)
    assert len(hist.history["loss"]) == 3
    assert not [w for w in caught if "ran out of data" in str(w.message)]
    # Three full passes, each a new epoch (Keras stops at the 6th batch
    # without seeing the end, which must not read as a pass left early).
    assert ds.ssdfeed_loader.stats()["batches"] >= 18 and ds.ssdfeed_loader.epoch >= 2


def test_take_1_preview_does_not_use_up_an_epoch(folder45):
    pytest.importorskip("tensorflow")
    import ssdfeed.tf as sftf
    ref = ssdfeed.Loader(folder45, **KERAS)
    epoch0 = [y.copy() for _, y in ref]
    epoch1 = [y.copy() for _, y in ref]
    ds = sftf.dataset(folder45, **KERAS)
    for images, labels in ds.take(1):  # the tutorials' preview
        np.testing.assert_array_equal(labels.numpy(), epoch0[0])
    first = [y.numpy() for _, y in ds]
    assert len(first) == len(epoch0)
    for a, b in zip(first, epoch0):
        np.testing.assert_array_equal(a, b)
    second = [y.numpy() for _, y in ds]
    for a, b in zip(second, epoch1):
        np.testing.assert_array_equal(a, b)


def test_resume_into_a_dataset_made_after_the_state_is_loaded(folder45):
    pytest.importorskip("tensorflow")
    import ssdfeed.tf as sftf
    ref = ssdfeed.Loader(folder45, **KERAS)
    epoch0 = [y.copy() for _, y in ref]
    ds = sftf.dataset(folder45, **KERAS)
    it = iter(ds)
    next(it), next(it)
    state = ds.ssdfeed_loader.state_dict()
    consumed = state["batches_consumed"]
    assert 2 <= consumed < len(epoch0)
    loader = ssdfeed.Loader(folder45, **KERAS)
    loader.load_state_dict(state)
    fresh = sftf.dataset(loader=loader)
    assert int(fresh.cardinality()) < 0  # unknown: this pass is a short one
    rest = [y.numpy() for _, y in fresh]
    assert len(rest) == len(epoch0) - consumed
    for a, b in zip(rest, epoch0[consumed:]):
        np.testing.assert_array_equal(a, b)
    sized = sftf.dataset(folder45, **KERAS)
    sized.ssdfeed_loader.load_state_dict(state)
    with pytest.raises(Exception, match="load the state into the loader before making"):
        list(sized)


# -- 9: torch's seed -------------------------------------------------------------

def test_torch_loader_follows_torch_manual_seed(folder45):
    torch = pytest.importorskip("torch")
    import ssdfeed.torch as sft

    def order():
        return _labels_of(sft.Loader(folder45, batch_size=45, shuffle=True, **SMALL))

    torch.manual_seed(1)
    a = order()
    torch.manual_seed(1)
    assert order() == a
    torch.manual_seed(2)
    assert order() != a
    assert sft.Loader(folder45, seed=5, **SMALL).sampler.seed == 5
    assert sft.Loader(folder45, rank=0, world_size=2, **SMALL).sampler.seed == 0


def test_torch_resume_without_a_seed_continues_the_saved_order(folder45):
    torch = pytest.importorskip("torch")
    import ssdfeed.torch as sft
    kw = dict(batch_size=8, shuffle=True, **SMALL)
    torch.manual_seed(11)
    first = sft.Loader(folder45, **kw)
    it = iter(first)
    seen = [next(it)[1].tolist() for _ in range(2)]
    state = first.state_dict()
    rest = [y.tolist() for _, y in it]
    torch.manual_seed(12)  # a new job: another draw
    resumed = sft.Loader(folder45, **kw)
    resumed.load_state_dict(state)
    assert [y.tolist() for _, y in resumed] == rest
    assert seen


# -- 8: the default worker count ---------------------------------------------------

def test_default_workers_follow_cpu_affinity(tmp_path):
    cpus = sorted(os.sched_getaffinity(0))
    code = "import ssdfeed; print(ssdfeed._ssdfeed.default_workers())"
    r = subprocess.run(["taskset", "-c", str(cpus[0]), sys.executable, "-c", code],
                       capture_output=True, text=True, timeout=60)
    if r.returncode != 0 and "taskset" in r.stderr:
        pytest.skip(f"taskset refused here: {r.stderr.strip()}")
    assert r.returncode == 0, r.stderr
    assert int(r.stdout) == 1  # it said os.cpu_count() before


# -- 10: the cache's whereabouts, said once -----------------------------------------

def test_first_cold_epoch_says_where_the_cache_is_and_how_big(folder45, tmp_path, caplog):
    root = str(tmp_path / "cache")
    caplog.set_level(logging.INFO, logger="ssdfeed")
    loader = ssdfeed.Loader(folder45, cache=root, cache_capacity=10 << 20, batch_size=9, **SMALL)
    for _ in range(2):
        list(loader)
    said = [r.getMessage() for r in caplog.records if r.name == "ssdfeed"]
    assert len(said) == 1, said
    assert root in said[0] and "will take about" in said[0] and "10.0 MiB" in said[0]
    caplog.clear()
    from ssdfeed import _compat
    _compat._logged_roots.clear()  # as a new process would start
    list(ssdfeed.Loader(folder45, cache=root, batch_size=9, **SMALL))  # warm: nothing to say
    assert not [r for r in caplog.records if r.name == "ssdfeed"]


# -- 7: the tf path's cold epoch ------------------------------------------------------

COLD = textwrap.dedent('''
    import json, resource, sys
    import ssdfeed
    adapter, source, cache = sys.argv[1:4]
    kw = dict(cache=cache, prepare=ssdfeed.Prepare(resize_short=160),
              augment=ssdfeed.RandomResizedCrop(128), batch_size=16, shuffle=True, workers=2)
    if adapter == "tf":
        import ssdfeed.tf
        it = ssdfeed.tf.dataset(source, **kw)
    else:
        it = ssdfeed.Loader(source, **kw)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    n = sum(int(y.shape[0]) for _, y in it)
    print(json.dumps((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / n))
''')


def test_tf_cold_epoch_does_no_more_page_faulting_than_numpy(tmp_path):
    """tf's generator dataset sets mallopt(M_TRIM_THRESHOLD, 128 KiB), which
    froze glibc's mmap threshold: every decoded image (> 128 KiB) was mapped
    and unmapped per sample, page faults and the mmap lock serialising the
    workers (the cold epoch ran on one core). Faults per sample show it
    without timing anything: about 60 then against 9 for the numpy path."""
    pytest.importorskip("tensorflow")
    import platform
    if platform.libc_ver()[0] != "glibc":
        pytest.skip("the malloc parameters are glibc's")
    uri = ssdfeed.make_dataset(str(tmp_path / "d"), format="folder", count=64, classes=4,
                               seed=2, min_side=300, max_side=420)["uri"]
    script = tmp_path / "cold.py"
    script.write_text(COLD)
    faults = {}
    for adapter in ("numpy", "tf"):
        r = subprocess.run([sys.executable, str(script), adapter, uri, str(tmp_path / adapter)],
                           capture_output=True, text=True, timeout=300,
                           env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
        assert r.returncode == 0, r.stderr[-3000:]
        faults[adapter] = float(r.stdout.strip().splitlines()[-1])
    assert faults["tf"] < 2 * faults["numpy"] + 5, faults
