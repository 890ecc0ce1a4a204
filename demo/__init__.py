"""The Gradio demo of `sumformers.view` (`app.build_demo`, needs the `demo` extra) and the Hub Space folder that runs
it over an exported model (`space.write_space`)."""
