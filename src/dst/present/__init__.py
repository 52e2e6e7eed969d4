"""What a person sees: the terminal timeline, the HTML pages of a run and of a campaign, JUnit XML for CI."""
