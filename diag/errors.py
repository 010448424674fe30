"""The one error type users see: a message and an exit code, never a traceback."""


class DiagError(Exception):
    """An error caused by the user's input or environment, shown as one line."""

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code
