"""ssdfeed.torch and ssdfeed.tf with the real frameworks (CPU builds)."""

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import ssdfeed


def _uri(small_datasets):
    return small_datasets["tfrecord"]["uri"]


KW = dict(prepare=ssdfeed.Prepare(resize_short=40), augment=ssdfeed.RandomResizedCrop(24),
          batch_size=8, shuffle=True, seed=2, workers=2)


def test_torch_tensors_and_a_training_step(small_datasets):
    torch = pytest.importorskip("torch")
    import ssdfeed.torch as sft
    loader = sft.Loader(_uri(small_datasets), dtype="float32", layout="NCHW",
                        mean=(0.5, 0.5, 0.5), std=(0.25, 0.25, 0.25), **KW)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(),
                                torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
                                torch.nn.Linear(4, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    n = 0
    for images, labels in loader:
        assert isinstance(images, torch.Tensor) and images.dtype == torch.float32
        assert images.shape[1:] == (3, 24, 24) and labels.dtype == torch.int64
        loss = torch.nn.functional.cross_entropy(model(images), labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        assert torch.isfinite(loss)
        n += len(labels)
    assert n == 48


def test_torch_tensors_share_the_batch_memory(small_datasets):
    pytest.importorskip("torch")
    import ssdfeed.torch as sft
    loader = sft.Loader(_uri(small_datasets), **KW)
    plain = ssdfeed.Loader(_uri(small_datasets), **KW)
    (t, _), (a, _) = next(iter(loader)), next(iter(plain))
    np.testing.assert_array_equal(t.numpy(), a)
    assert not t.numpy().flags.owndata


def test_torch_loader_takes_the_dataloader_names(small_datasets):
    pytest.importorskip("torch")
    import ssdfeed.torch as sft
    uri = _uri(small_datasets)
    kw = {k: v for k, v in KW.items() if k != "workers"}
    loader = sft.Loader(uri, num_workers=3, pin_memory=False, drop_last=True,
                        persistent_workers=True, **kw)
    assert loader.num_workers == 3 and loader.batch_size == 8 and loader.drop_last
    assert not loader.pin_memory
    assert len(loader.dataset) == 48 and loader.dataset.uri == uri
    assert [len(l) for _, l in loader] == [8] * 6
    assert sft.Loader(uri, num_workers=0, **kw).num_workers >= 1  # 0: one per core
    for bad, words in ((dict(num_workers=-1), "num_workers must be an int >= 0"),
                       (dict(num_workers=2, workers=2), "workers or num_workers, not both"),
                       (dict(sampler=object()), "does not take sampler"),
                       (dict(collate_fn=list), "does not take collate_fn"),
                       (dict(prefetch_factor=2), "use prefetch=N"),
                       (dict(persistent_workers="yes"), "persistent_workers must be")):
        with pytest.raises(ValueError, match=words):
            sft.Loader(uri, **{**kw, **bad})


DIST_SCRIPT = textwrap.dedent("""
    import json, sys
    import torch.distributed as dist
    import ssdfeed
    import ssdfeed.torch as sft
    rank, world, init, uri = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
    dist.init_process_group("gloo", init_method="file://" + init, rank=rank, world_size=world)
    loader = sft.Loader(uri, prepare=ssdfeed.Prepare(resize=(16, 16)), batch_size=5,
                        shuffle=True, seed=9)
    loader.set_epoch(1)
    ids = []
    for images, labels in loader:
        ids += [int(x) for x in labels]
    print(json.dumps({"rank": rank, "n": len(ids), "batches": len(loader)}))
    dist.destroy_process_group()
""")


def test_torch_distributed_ranks_split_the_epoch(small_datasets, tmp_path):
    pytest.importorskip("torch")
    script = tmp_path / "dist.py"
    script.write_text(DIST_SCRIPT)
    procs = [subprocess.Popen([sys.executable, str(script), str(r), "2", str(tmp_path / "init"),
                               _uri(small_datasets)], stdout=subprocess.PIPE, text=True)
             for r in range(2)]
    outs = []
    for p in procs:
        out, _ = p.communicate(timeout=180)
        assert p.returncode == 0
        outs.append(json.loads(out.strip().splitlines()[-1]))
    assert sorted(o["rank"] for o in outs) == [0, 1]
    assert all(o["n"] == 24 for o in outs), outs  # 48 samples over 2 ranks


def test_tensorflow_dataset_element_spec_and_epochs(small_datasets):
    tf = pytest.importorskip("tensorflow")
    import ssdfeed.tf as sftf
    ds = sftf.dataset(_uri(small_datasets), **KW)
    images_spec, labels_spec = ds.element_spec
    assert images_spec.shape.as_list() == [None, 24, 24, 3] and images_spec.dtype == tf.uint8
    assert labels_spec.shape.as_list() == [None] and labels_spec.dtype == tf.int64
    epochs = []
    for _ in range(2):
        epochs.append([(x.numpy(), y.numpy()) for x, y in ds])
    assert sum(len(y) for _, y in epochs[0]) == 48
    assert not np.array_equal(epochs[0][0][0], epochs[1][0][0]), "epoch did not advance"
    ref = ssdfeed.Loader(_uri(small_datasets), **KW)
    ref.set_epoch(0)
    for (x, y), (rx, ry) in zip(epochs[0], ref):
        np.testing.assert_array_equal(x, rx)
        np.testing.assert_array_equal(y, ry)


def test_keras_fit_runs_on_the_dataset(small_datasets):
    tf = pytest.importorskip("tensorflow")
    import ssdfeed.tf as sftf
    ds = sftf.dataset(_uri(small_datasets), dtype="float32", mean=(127.5,) * 3, std=(64,) * 3,
                      **KW)
    model = tf.keras.Sequential([tf.keras.Input((24, 24, 3)), tf.keras.layers.Conv2D(4, 3),
                                 tf.keras.layers.GlobalAveragePooling2D(),
                                 tf.keras.layers.Dense(4)])
    model.compile("sgd", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    hist = model.fit(ds, epochs=2, verbose=0)
    assert len(hist.history["loss"]) == 2 and np.isfinite(hist.history["loss"]).all()


def test_tensorflow_dataset_resumes_from_a_restored_state(small_datasets):
    pytest.importorskip("tensorflow")
    import ssdfeed.tf as sftf
    uri = _uri(small_datasets)
    ref = ssdfeed.Loader(uri, **KW)
    epoch0 = [(x, y) for x, y in ref]
    epoch1 = [(x, y) for x, y in ref]
    ds = sftf.dataset(uri, **KW)
    it = iter(ds)
    next(it), next(it)
    state = ds.ssdfeed_loader.state_dict()
    consumed = state["batches_consumed"]
    # tf.data's injected prefetch is off: the state is where the model is.
    assert state["epoch"] == 0 and consumed == 2 < len(epoch0)
    restored = ssdfeed.Loader(uri, **KW)
    restored.load_state_dict(state)  # before making the dataset: its first pass is short
    fresh = sftf.dataset(loader=restored)
    rest = [(x.numpy(), y.numpy()) for x, y in fresh]
    assert len(rest) == len(epoch0) - consumed, "the restored position was ignored"
    for (x, y), (rx, ry) in zip(rest, epoch0[consumed:]):
        np.testing.assert_array_equal(x, rx)
        np.testing.assert_array_equal(y, ry)
    after = [(x.numpy(), y.numpy()) for x, y in fresh]  # the pass after: epoch 1
    assert len(after) == len(epoch1)
    for (x, y), (rx, ry) in zip(after, epoch1):
        np.testing.assert_array_equal(x, rx)
        np.testing.assert_array_equal(y, ry)


class _CountingCudart:
    """Stands in for torch.cuda.cudart() on a machine without CUDA."""

    def __init__(self):
        self.registered, self.unregistered = [], []

    def cudaHostRegister(self, ptr, nbytes, flags):
        self.registered.append(ptr)
        return 0

    def cudaHostUnregister(self, ptr):
        self.unregistered.append(ptr)
        return 0


@pytest.mark.parametrize("how", ["close", "gc"])
def test_torch_loader_unregisters_the_memory_it_pinned(small_datasets, monkeypatch, how):
    torch = pytest.importorskip("torch")
    import gc
    import ssdfeed.torch as sft
    fake = _CountingCudart()
    monkeypatch.setattr(torch.cuda, "cudart", lambda: fake)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # else: a warning, unpinned
    loader = sft.Loader(_uri(small_datasets), pin_memory=True, **KW)
    batches = list(loader)
    assert fake.registered and not fake.unregistered
    del batches
    if how == "close":
        loader.close()
    else:
        del loader
        gc.collect()
    assert sorted(fake.unregistered) == sorted(fake.registered)
