from aoi_fl.pipeline.data_status import data_status


def test_missing_cifar_is_reported_not_faked(tmp_path):
    run, synthetic, message = data_status("cifar10", "cpu", str(tmp_path))
    assert (run, synthetic) == (False, False)
    assert "fetch-cifar --name cifar10" in message and "cifar-10-batches-py" in message
    run, synthetic, message = data_status("cifar100", "smoke", str(tmp_path))
    assert (run, synthetic) == (True, True) and "SYNTHETIC" in message
