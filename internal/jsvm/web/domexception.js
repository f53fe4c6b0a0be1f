// DOMException, the error type of the web API (AbortError, DataCloneError,
// InvalidCharacterError, ...). As in Node it is an Error: instanceof
// Error holds and the stack is its own.
(function () {
  "use strict";
  const NAMES = [
    "IndexSizeError", "DOMStringSizeError", "HierarchyRequestError", "WrongDocumentError",
    "InvalidCharacterError", "NoDataAllowedError", "NoModificationAllowedError", "NotFoundError",
    "NotSupportedError", "InUseAttributeError", "InvalidStateError", "SyntaxError",
    "InvalidModificationError", "NamespaceError", "InvalidAccessError", "ValidationError",
    "TypeMismatchError", "SecurityError", "NetworkError", "AbortError", "URLMismatchError",
    "QuotaExceededError", "TimeoutError", "InvalidNodeTypeError", "DataCloneError",
  ];
  const CONSTANTS = [
    "INDEX_SIZE_ERR", "DOMSTRING_SIZE_ERR", "HIERARCHY_REQUEST_ERR", "WRONG_DOCUMENT_ERR",
    "INVALID_CHARACTER_ERR", "NO_DATA_ALLOWED_ERR", "NO_MODIFICATION_ALLOWED_ERR", "NOT_FOUND_ERR",
    "NOT_SUPPORTED_ERR", "INUSE_ATTRIBUTE_ERR", "INVALID_STATE_ERR", "SYNTAX_ERR",
    "INVALID_MODIFICATION_ERR", "NAMESPACE_ERR", "INVALID_ACCESS_ERR", "VALIDATION_ERR",
    "TYPE_MISMATCH_ERR", "SECURITY_ERR", "NETWORK_ERR", "ABORT_ERR", "URL_MISMATCH_ERR",
    "QUOTA_EXCEEDED_ERR", "TIMEOUT_ERR", "INVALID_NODE_TYPE_ERR", "DATA_CLONE_ERR",
  ];
  const state = new WeakMap(); // DOMException → {name, message}

  class DOMException extends Error {
    constructor(message, options) {
      super();
      delete this.message; // read through the getter, as in Node
      let name = "Error";
      if (options !== null && typeof options === "object") {
        if ("cause" in options) {
          Object.defineProperty(this, "cause", { value: options.cause, writable: true, enumerable: false, configurable: true });
        }
        if ("name" in options) name = String(options.name);
      } else if (options !== undefined) {
        name = String(options);
      }
      state.set(this, { name, message: message === undefined ? "" : String(message) });
    }
    get name() {
      return own(this).name;
    }
    get message() {
      return own(this).message;
    }
    get code() {
      const i = NAMES.indexOf(own(this).name);
      return i < 0 ? 0 : i + 1;
    }
  }
  function own(e) {
    const s = state.get(e);
    if (!s) throw new TypeError("Value of \"this\" must be of type DOMException");
    return s;
  }
  Object.defineProperty(DOMException.prototype, Symbol.toStringTag, { value: "DOMException", configurable: true });
  CONSTANTS.forEach((c, i) => {
    const d = { value: i + 1, enumerable: true };
    Object.defineProperty(DOMException, c, d);
    Object.defineProperty(DOMException.prototype, c, d);
  });
  Object.defineProperty(globalThis, "DOMException", { value: DOMException, writable: true, enumerable: false, configurable: true });
});
