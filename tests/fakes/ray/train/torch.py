"""ray.train.torch.TorchTrainer of the fake ray: fit() runs the loop once
in this process, as one worker, and returns what it returned."""


class TorchTrainer(object):
    def __init__(self, train_loop_per_worker, *, train_loop_config=None, **kwargs):
        self.train_loop_per_worker = train_loop_per_worker
        self.train_loop_config = train_loop_config
        self.kwargs = kwargs

    def fit(self):
        if self.train_loop_config is not None:
            return self.train_loop_per_worker(self.train_loop_config)
        return self.train_loop_per_worker()
