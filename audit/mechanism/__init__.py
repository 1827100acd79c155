"""``run mechanism``: audits of textbook mechanisms, DP-ERM output perturbation and mechanism
plugins from many draws per world. Modules: :mod:`.runner`, :mod:`.command`."""
