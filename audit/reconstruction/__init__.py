"""``run reconstruction``: the n-candidate reconstruction game against the ReRo bound of the claim."""
