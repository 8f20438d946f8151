"""A Flower App in the quickstart-pytorch shape whose training nodes an aoi_fl policy chooses."""
