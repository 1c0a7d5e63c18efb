"""The Hugging Face Trainer with TraceML: a tiny BERT built from a config
(no weights are downloaded) on synthetic token data, on the CPU.

    traceml run examples/integrations/hf_trainer.py --steps 60
    python examples/integrations/hf_trainer.py --steps 60      # summary at exit
    traceml run --nproc-per-node 2 examples/integrations/hf_trainer.py --slow-rank 1

Flags inject known causes for the tests (tests/e2e/test_integrations_hf.py):
--delay-ms D sleeps D ms in the collator per batch (a slow input pipeline;
on rank R only with --delay-rank R),
--grad-accum K accumulates K micro-batches per optimizer step, --slow-rank R
--slow-ms S sleeps S ms in the forward of rank R (a straggler), --api
trainer uses TraceMLTrainer instead of Trainer(callbacks=[TraceMLCallback()]).
"""
import argparse
import os
import tempfile
import time

import torch
from torch.utils.data import Dataset, default_collate
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

from traceml_ai.integrations.huggingface import TraceMLCallback, TraceMLTrainer


class Tokens(Dataset):
    """Random token sequences whose label is a function of the first token."""

    def __init__(self, n, seq_len, vocab):
        g = torch.Generator().manual_seed(0)
        self.ids = torch.randint(0, vocab, (n, seq_len), generator=g)
        self.labels = (self.ids[:, 0] % 2).long()

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "attention_mask": torch.ones_like(self.ids[i]),
                "labels": self.labels[i]}


class SlowCollator(object):
    def __init__(self, delay_s):
        self.delay_s = delay_s

    def __call__(self, samples):
        if self.delay_s:
            time.sleep(self.delay_s)
        return default_collate(samples)


class Model(BertForSequenceClassification):
    """BERT whose forward sleeps `delay_s` first (0 but on the slowed rank)."""
    delay_s = 0.0

    def forward(self, *args, **kwargs):
        if self.delay_s:
            time.sleep(self.delay_s)
        return super().forward(*args, **kwargs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=60, help="optimizer steps")
    ap.add_argument("--grad-accum", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--seq-len", type=int, default=32)
    ap.add_argument("--hidden", type=int, default=32, help="BERT hidden size (2 layers)")
    ap.add_argument("--delay-ms", type=float, default=0.0, help="collator sleep per batch")
    ap.add_argument("--delay-rank", type=int, default=-1, help="only this rank's collator sleeps")
    ap.add_argument("--slow-rank", type=int, default=-1)
    ap.add_argument("--slow-ms", type=float, default=20.0)
    ap.add_argument("--no-token-average", action="store_true",
                    help="average_tokens_across_devices=False: no cross-rank gather per step")
    ap.add_argument("--api", choices=("callback", "trainer", "init", "init+callback"),
                    default="callback", help="init: TraceML 0.5.0's huggingface.init(), "
                    "which adds the callback to every Trainer")
    a = ap.parse_args()

    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    torch.manual_seed(0)
    torch.set_num_threads(1)
    config = BertConfig(vocab_size=128, hidden_size=a.hidden, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=2 * a.hidden, max_position_embeddings=max(64, a.seq_len),
                        num_labels=2)
    model = Model(config)
    if rank == a.slow_rank:
        model.delay_s = a.slow_ms / 1000.0
    n = a.steps * a.grad_accum * a.batch_size * world
    data = Tokens(n, a.seq_len, config.vocab_size)

    with tempfile.TemporaryDirectory() as out:
        args = TrainingArguments(
            output_dir=out, report_to=[], use_cpu=True, save_strategy="no",
            logging_strategy="no", eval_strategy="no", disable_tqdm=True,
            per_device_train_batch_size=a.batch_size, gradient_accumulation_steps=a.grad_accum,
            max_steps=a.steps, learning_rate=1e-3, dataloader_num_workers=0,
            remove_unused_columns=False,      # Model.forward takes (*args, **kwargs)
            ddp_backend="gloo" if world > 1 else None, ddp_find_unused_parameters=False,
            average_tokens_across_devices=not a.no_token_average, seed=0)
        kw = dict(model=model, args=args, train_dataset=data,
                  data_collator=SlowCollator(a.delay_ms / 1000.0 if a.delay_rank in (-1, rank) else 0.0))
        if a.api == "trainer":
            trainer = TraceMLTrainer(**kw)
        elif a.api.startswith("init"):
            from traceml_ai.integrations import huggingface
            huggingface.init()
            cbs = [huggingface.TraceMLTrainerCallback()] if a.api == "init+callback" else None
            trainer = Trainer(callbacks=cbs, **kw)
        else:
            trainer = Trainer(callbacks=[TraceMLCallback()], **kw)
        result = trainer.train()
    if rank == 0:
        print("optimizer steps: %d" % result.global_step)


if __name__ == "__main__":
    main()
