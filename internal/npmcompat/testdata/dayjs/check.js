import dayjs from "dayjs";
import utc from "dayjs/plugin/utc.js";

dayjs.extend(utc);

const T = Date.UTC(2024, 1, 29, 23, 5, 9, 7); // a leap day, late in the day

export function run() {
  const d = dayjs.utc(T);
  return {
    format: d.format("YYYY-MM-DD HH:mm:ss.SSS [Z] dddd MMMM A"),
    iso: d.toISOString(),
    add: d.add(1, "day").format("YYYY-MM-DD"),
    addMonth: d.add(1, "month").format(),
    startOf: d.startOf("month").valueOf(),
    endOf: d.endOf("year").toISOString(),
    diff: dayjs.utc("2025-01-01").diff(dayjs.utc("2024-01-01"), "day"),
    utcOffset: d.utcOffset(),
    offset: d.utcOffset(120).format(),
    parse: dayjs.utc("2024-03-10T12:00:00Z").unix(),
    invalid: dayjs("nope").isValid(),
  };
}
