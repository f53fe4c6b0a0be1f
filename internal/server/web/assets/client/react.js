// react.js — React hooks over the handoff browser client (docs/apps.md).
//
//   import React from "react";
//   import { connect } from "/client/handoff.js";
//   import { hooks } from "/client/react.js";
//   const { useLiveQuery, useDocument } = hooks(React);
//
//   function Board({ db }) {
//     const { docs, loading, error } = useLiveQuery(db, { field: "status", key: "pending" });
//     ...
//   }
//
// The server does not ship React: the page passes in its own. The hooks
// use only useState, useEffect and useRef, so any library that keeps
// React's contract for those works too.

/**
 * hooks returns useLiveQuery and useDocument bound to React (or anything
 * with React's useState, useEffect and useRef).
 */
export function hooks(React) {
  const { useState, useEffect, useRef } = React;

  // useSubscription runs subscribe(onValue, onError) while the
  // component is mounted and its key stays the same; a new key (other
  // arguments) stops the old subscription and starts another.
  function useSubscription(key, subscribe, initial) {
    const [state, setState] = useState({ value: initial, loading: true, error: null });
    const latest = useRef(subscribe);
    latest.current = subscribe;
    useEffect(() => {
      let live = true;
      setState((s) => (s.loading && s.error === null && s.value === initial ? s : { value: initial, loading: true, error: null }));
      let stop = () => {};
      try {
        stop = latest.current(
          (value) => live && setState({ value, loading: false, error: null }),
          (error) => live && setState((s) => ({ value: s.value, loading: false, error })),
        );
      } catch (error) {
        setState({ value: initial, loading: false, error });
      }
      return () => {
        live = false;
        stop();
      };
    }, [key]);
    return state;
  }

  /**
   * useLiveQuery returns {docs, loading, error} for db.liveQuery(query):
   * query is {field, key}, {field, from, to}, {field, prefix} or {} (every
   * document). db is a handle from connect(...).app(ref).db(name); null
   * waits. The subscription ends on unmount or when db or query change.
   */
  function useLiveQuery(db, query = {}) {
    const key = db ? `${db.app.client.server}|${db.app.ref}|${db.name}|${JSON.stringify(query || {})}` : "";
    const { value, loading, error } = useSubscription(
      key,
      (onValue, onError) => (db ? db.liveQuery(query || {}, onValue, { onError }) : () => {}),
      EMPTY,
    );
    return { docs: value, loading: db ? loading : false, error };
  }

  /**
   * useDocument returns {doc, loading, error}: the live document with
   * this id, null while it is absent or deleted.
   */
  function useDocument(db, id) {
    const key = db && id != null ? `${db.app.client.server}|${db.app.ref}|${db.name}|${String(id)}` : "";
    const { value, loading, error } = useSubscription(
      key,
      (onValue, onError) => (db && id != null ? db.liveDoc(id, onValue, { onError }) : () => {}),
      null,
    );
    return { doc: value, loading: db && id != null ? loading : false, error };
  }

  return { useLiveQuery, useDocument };
}

const EMPTY = Object.freeze([]);
