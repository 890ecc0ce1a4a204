"""What the sumformers pipelines share: the model's own processor, and batches that survive a bad item."""

import functools

from transformers import Pipeline


def reject_unknown_options(options: dict) -> None:
    """A misspelt or retired option (say `max_steps`) is an error, not silently ignored."""
    if options:
        raise TypeError(f"unknown option(s) {sorted(options)}")


class SummarizationPipeline(Pipeline):
    """A `Pipeline` whose `preprocess` goes through the processor the model declares (`model.processor_class`).

    A list of inputs is a batch: an item the processor rejects (`None`, a number, a malformed dict) gets
    `{"error": message}` in its place and the other items are summarized as usual. A single bad input raises the
    processor's one-line TypeError or ValueError.
    """

    _load_processor = False
    _load_image_processor = False
    _load_feature_extractor = False
    _load_tokenizer = True

    @functools.cached_property
    def model_processor(self):
        return self.model.processor_class(self.tokenizer, self.model.config)

    def __call__(self, inputs, *args, **kwargs):
        if isinstance(inputs, list):
            errors = {}
            for index, item in enumerate(inputs):
                try:
                    self.model_processor.check_input(item)
                except (TypeError, ValueError) as error:
                    errors[index] = str(error)
            if errors:
                valid = [item for index, item in enumerate(inputs) if index not in errors]
                results = iter(super().__call__(valid, *args, **kwargs) if valid else [])
                return [{"error": errors[index]} if index in errors else next(results) for index in range(len(inputs))]
        return super().__call__(inputs, *args, **kwargs)


__all__ = ["SummarizationPipeline", "reject_unknown_options"]
