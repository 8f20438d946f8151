"""The ClientApp: trains and evaluates the app's model on this node's partition. It knows
nothing of aoi_fl; its evaluate reply's ``eval_loss`` (and ``eval_loss_rms``, for Oort) is
what the loss-probing policies rank the clients by."""

import torch
from flwr.app import ArrayRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

from quickstart.task import Net, load_data, test, train

app = ClientApp()


def _setup(msg: Message, context: Context):
    torch.set_num_threads(1)
    net = Net()
    net.load_state_dict(msg.content["arrays"].to_torch_state_dict())
    partition, partitions = (context.node_config[k] for k in ("partition-id", "num-partitions"))
    return net, load_data(context.run_config["data-root"], partition, partitions)


@app.train()
def train_fn(msg: Message, context: Context) -> Message:
    net, (trainset, _) = _setup(msg, context)
    c = context.run_config
    seed = int(msg.content["config"]["server-round"]) * 1_000 + context.node_config["partition-id"]
    loss = train(net, trainset, c["local-steps"], c["batch-size"], c["lr"], seed)
    metrics = MetricRecord({"train_loss": loss, "num-examples": len(trainset[1])})
    content = RecordDict({"arrays": ArrayRecord(net.state_dict()), "metrics": metrics})
    return Message(content=content, reply_to=msg)


@app.evaluate()
def evaluate_fn(msg: Message, context: Context) -> Message:
    net, (_, heldout) = _setup(msg, context)
    loss, rms, accuracy = test(net, heldout)
    metrics = {"eval_loss": loss, "eval_loss_rms": rms, "eval_acc": accuracy}
    metrics["num-examples"] = len(heldout[1])
    return Message(content=RecordDict({"metrics": MetricRecord(metrics)}), reply_to=msg)
