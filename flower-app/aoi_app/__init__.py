"""The aoi-fl Flower App's ServerApp and ClientApp (the work is :mod:`aoi_fl.flower.app`'s)."""
