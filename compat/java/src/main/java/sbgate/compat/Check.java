package sbgate.compat;

import java.util.Objects;

/** Assertions whose failure says what was expected and what came. */
final class Check {
    private Check() {
    }

    static void that(boolean ok, String what) {
        if (!ok) {
            throw new AssertionError(what);
        }
    }

    static void equal(String what, Object want, Object got) {
        if (!Objects.equals(want, got)) {
            throw new AssertionError(what + ": got " + show(got) + ", want " + show(want));
        }
    }

    /** The value equals want and is of want's class (an AMQP int must not come back a long). */
    static void sameTyped(String what, Object want, Object got) {
        if (got == null || want.getClass() != got.getClass() || !Objects.equals(want, got)) {
            throw new AssertionError(what + ": got " + show(got) + ", want " + show(want));
        }
    }

    static String show(Object v) {
        if (v == null) {
            return "null";
        }
        String text = v instanceof byte[] b ? java.util.Arrays.toString(b) : String.valueOf(v);
        if (text.length() > 200) {
            text = text.substring(0, 200) + "…";
        }
        return text + " (" + v.getClass().getName() + ")";
    }

    /** Runs op and returns what it threw, failing when it threw nothing or not a T. */
    static <T extends Throwable> T throwsA(Class<T> type, String what, ThrowingRunnable op) {
        try {
            op.run();
        } catch (Throwable t) {
            if (type.isInstance(t)) {
                return type.cast(t);
            }
            throw new AssertionError(what + ": threw " + Scenarios.describe(t) + ", want " + type.getName(), t);
        }
        throw new AssertionError(what + ": succeeded, want " + type.getName());
    }

    /**
     * Checks that do not stop the scenario: each mismatch is noted and verify() fails with all of
     * them, so one run shows every difference rather than the first.
     */
    static final class Soft {
        private final java.util.List<String> problems = new java.util.ArrayList<>();

        void that(boolean ok, String what) {
            if (!ok) {
                problems.add(what);
            }
        }

        void equal(String what, Object want, Object got) {
            if (!Objects.equals(want, got)) {
                problems.add(what + ": got " + show(got) + ", want " + show(want));
            }
        }

        void sameTyped(String what, Object want, Object got) {
            if (got == null || want.getClass() != got.getClass() || !Objects.equals(want, got)) {
                problems.add(what + ": got " + show(got) + ", want " + show(want));
            }
        }

        void verify() {
            if (!problems.isEmpty()) {
                throw new AssertionError(String.join("; ", problems));
            }
        }
    }

    @FunctionalInterface
    interface ThrowingRunnable {
        void run() throws Exception;
    }
}
