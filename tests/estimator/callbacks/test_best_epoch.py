"""BestEpochRestorer: the best epoch is restored, ties keep the earlier epoch, a loss keeps the lowest."""

import torch

from fmmlearn.estimator import BestEpochRestorer


class FakeHistory(list):
    """Just enough of skorch's History for the callbacks: rows of dicts, ``h[-1, key]``."""

    def record(self, key, value):
        self[-1][key] = value

    def __getitem__(self, item):
        if isinstance(item, tuple):
            return list.__getitem__(self, item[0])[item[1]]
        return list.__getitem__(self, item)


class FakeNet:
    def __init__(self):
        self.module_ = torch.nn.Linear(1, 1, bias=False)
        self.history = FakeHistory()


def test_best_epoch_is_restored_and_ties_keep_the_earlier_epoch():
    net, cb = FakeNet(), BestEpochRestorer("valid_acc")
    cb.on_train_begin(net)
    for epoch, (score, weight) in enumerate([(0.5, 1.0), (0.8, 2.0), (0.8, 3.0), (0.6, 4.0)], start=1):
        net.history.append({"epoch": epoch, "valid_acc": score})
        with torch.no_grad():
            net.module_.weight.fill_(weight)
        cb.on_epoch_end(net)
    cb.on_train_end(net)
    assert net.module_.weight.item() == 2.0
    assert cb.best_epoch_ == 2
    assert [h["valid_acc_best"] for h in net.history] == [True, True, False, False]


def test_a_loss_as_selection_metric_keeps_the_lowest_epoch():
    restorer, net = BestEpochRestorer("valid_log_loss", greater_is_better=False), FakeNet()
    restorer.on_train_begin(net)
    for epoch, loss in enumerate([0.9, 0.4, 0.6], start=1):
        net.history.append({"epoch": epoch, "valid_log_loss": loss})
        with torch.no_grad():
            net.module_.weight.fill_(epoch)
        restorer.on_epoch_end(net)
    restorer.on_train_end(net)
    assert restorer.best_epoch_ == 2 and net.module_.weight.item() == 2
