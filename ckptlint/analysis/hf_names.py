"""Names of Hugging Face classes, without libcst: the project index (which the warm path
imports) needs them too."""

TRAINING_ARGUMENTS_CLASSES = frozenset(
    {
        "transformers.TrainingArguments",
        "transformers.training_args.TrainingArguments",
        "transformers.Seq2SeqTrainingArguments",
        "transformers.training_args_seq2seq.Seq2SeqTrainingArguments",
        # TRL's configs subclass TrainingArguments.
        *(
            f"trl.{name}"
            for name in (
                "SFTConfig", "DPOConfig", "GRPOConfig", "RewardConfig", "ORPOConfig", "KTOConfig",
                "PPOConfig", "RLOOConfig", "CPOConfig", "BCOConfig", "GKDConfig", "PRMConfig",
                "OnlineDPOConfig", "XPOConfig", "NashMDConfig", "AlignPropConfig", "DDPOConfig",
            )
        ),
    }
)
