"""TraceML inside the training frameworks (docs/integrations.md).

    traceml_ai.integrations.huggingface   TraceMLCallback, TraceMLTrainer (transformers.Trainer)
    traceml_ai.integrations.accelerate    trace_step(accelerator, *models) for Accelerate loops
    traceml_ai.integrations.lightning     TraceMLCallback (lightning.pytorch)
    traceml_ai.integrations.pytorch_lightning   TraceMLCallback (pytorch_lightning)
    traceml_ai.integrations.ray           TraceMLTorchTrainer (ray.train.torch.TorchTrainer)
    traceml_ai.integrations.deepspeed     trace_engine(engine) (DeepSpeedEngine)
    traceml_ai.integrations.ignite        TraceMLHandler(model).attach(engine) (ignite Engine)
    traceml_ai.integrations.monai         TraceMLHandler, init (MONAI's SupervisedTrainer)
    traceml_ai.integrations.wandb         log_summary(run=None, step=None)
    traceml_ai.integrations.mlflow        log_summary(step=None)

Importing this package imports no framework; each module imports its own
when it is imported. Each starts TraceML (init(mode="auto")) when the
script has not, and each checks the framework's version: one warning line
naming the version it needs, and training goes on untraced.
"""
