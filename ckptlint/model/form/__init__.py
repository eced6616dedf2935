"""The summary form the model's layers speak: expressions and function summaries
(`summary`), the abstract values the evaluator yields and the library facts are written in
(`values`), and which `if` branches code sits in with what their tests require (`branching`)."""
