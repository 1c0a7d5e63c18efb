"""A fake `ray` for the quick tier: only what traceml_ai.integrations.ray
imports (ray.train.torch.TorchTrainer), so that its fallbacks (ray too
old, TraceML disabled) are tested without starting a Ray cluster. The
real Ray Train runs in tests/e2e/test_integrations_ray.py."""
__version__ = "0.0-fake"
