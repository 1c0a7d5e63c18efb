"""A tiny RF-DETR training on the CPU traced by TraceML's RF-DETR
integration, with an injectable cause (tests/e2e/test_integrations_rfdetr.py).

    traceml run examples/integrations/rfdetr_train.py --delay-ms 400
    python examples/integrations/rfdetr_train.py          # summary at exit

Needs rfdetr[train] (with torchvision, which PyPI's CPU torch 2.13 here
cannot import: scripts/rfdetr-venv makes a venv that can). Nothing is
downloaded: the model is RF-DETR Nano built from its config
(pretrain_weights=None) with --queries object queries in --groups
group (RF-DETR's 300 and 13 make a CPU step take seconds), trained at
--resolution (64 px by default, multi-scale off) on a synthetic COCO-format dataset of --images images of
coloured squares that this script writes to --data (a temporary folder
by default). Injected cause, exact:

  --delay-ms D        the training DataLoader's collate_fn sleeps D ms per batch

--api init (default) calls traceml_ai.integrations.rfdetr.init() before
model.train() (TraceML 0.5.0's API); --api none trains without TraceML.
Prints "optimizer steps: N" at the end (Lightning's global_step).
"""
import argparse
import json
import os
import tempfile
import time


def parse():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--images", type=int, default=16, help="training images")
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--resolution", type=int, default=64)
    p.add_argument("--queries", type=int, default=20, help="num_queries (RF-DETR's: 300)")
    p.add_argument("--groups", type=int, default=1, help="group_detr (RF-DETR's: 13)")
    p.add_argument("--delay-ms", type=float, default=0.0)
    p.add_argument("--data", default=None, help="dataset folder [a temporary one]")
    p.add_argument("--api", choices=("init", "none"), default="init")
    return p.parse_args()


def sleep_ms(ms):
    """Sleeps ms milliseconds (the tests compare with what it really slept)."""
    if ms > 0:
        time.sleep(ms / 1000.0)


def write_coco(root, n_train, size=96):
    """train/ valid/ test/ folders of JPEGs, each with one square, and
    their _annotations.coco.json (Roboflow's COCO layout)."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    for split, n in (("train", n_train), ("valid", 2), ("test", 2)):
        folder = os.path.join(root, split)
        os.makedirs(folder, exist_ok=True)
        images, anns = [], []
        for i in range(n):
            img = (rng.random((size, size, 3)) * 64).astype("uint8")
            w, h = (int(v) for v in rng.integers(16, 40, 2))
            x, y = (int(v) for v in rng.integers(0, size - 40, 2))
            img[y:y + h, x:x + w] = (255, 64, 64)
            name = "img%03d.jpg" % i
            Image.fromarray(img).save(os.path.join(folder, name))
            images.append({"id": i, "file_name": name, "width": size, "height": size})
            anns.append({"id": i, "image_id": i, "category_id": 1, "bbox": [x, y, w, h],
                         "area": w * h, "iscrowd": 0})
        cats = [{"id": 0, "name": "shapes", "supercategory": "none"},
                {"id": 1, "name": "square", "supercategory": "shapes"}]
        with open(os.path.join(folder, "_annotations.coco.json"), "w") as f:
            json.dump({"images": images, "annotations": anns, "categories": cats}, f)


def slow_training_batches(delay_ms):
    """RF-DETR's data module builds its own loaders: the training one's
    collate_fn is wrapped to sleep first (an attribute a DataLoader lets
    one set; its iterator reads it when an epoch starts)."""
    from rfdetr.training import RFDETRDataModule

    orig = RFDETRDataModule.train_dataloader

    def train_dataloader(self):
        loader = orig(self)
        collate = loader.collate_fn

        def slow_collate(batch):
            sleep_ms(delay_ms)
            return collate(batch)

        loader.collate_fn = slow_collate
        return loader

    RFDETRDataModule.train_dataloader = train_dataloader


def main():
    a = parse()
    import torch

    torch.set_num_threads(1)
    if a.api == "init":
        from traceml_ai.integrations import rfdetr as traceml_rfdetr
        traceml_rfdetr.init()

    if a.data is None:
        with tempfile.TemporaryDirectory(prefix="rfdetr_data_") as data:
            train(a, data)
    else:
        train(a, a.data)


def train(a, data):
    from rfdetr import RFDETRNano

    write_coco(data, a.images)
    if a.delay_ms > 0:
        slow_training_batches(a.delay_ms)
    steps = []
    import pytorch_lightning as pl
    from rfdetr import training

    class CountSteps(pl.Callback):
        def on_train_end(self, trainer, pl_module):
            steps.append(trainer.global_step)

    build = training.build_trainer

    def build_trainer(*args, **kwargs):     # the example's own step count
        trainer = build(*args, **kwargs)
        trainer.callbacks.append(CountSteps())
        return trainer

    training.build_trainer = build_trainer
    model = RFDETRNano(pretrain_weights=None, device="cpu", num_queries=a.queries,
                       num_select=a.queries, group_detr=a.groups)
    model.train(dataset_dir=data, epochs=a.epochs, batch_size=a.batch, grad_accum_steps=1,
                num_workers=0, device="cpu", resolution=a.resolution, multi_scale=False,
                output_dir=os.path.join(data, "output"), tensorboard=False, progress_bar=None)
    print("optimizer steps: %d" % (steps[-1] if steps else -1), flush=True)


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
