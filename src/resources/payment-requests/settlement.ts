import { money, toMinor } from '../../domain/money.ts'
import { Problem } from '../../domain/problems.ts'
import { isoNow } from '../../domain/time.ts'
import type { Queryable } from '../../store/store.ts'
import { recordAudit } from '../audit/store.ts'
import { defineOperation, type OperationContext } from '../operations.ts'
import type { PaymentRow } from '../payments/store.ts'
import type { UnitOfWork } from '../unit-of-work.ts'
import type { PaymentRequestResponse as Response } from './schema.ts'
import { PaymentRequestResponse, SimulateOutcome } from './schema.ts'
import type { PaymentRequestServiceDeps } from './service.ts'
import type { PaymentRequestRow } from './store.ts'

type View = (db: Queryable, clientCode: string, row: PaymentRequestRow, known?: PaymentRow | null) => Promise<Response>

/** The sandbox's settlement of a request: its test form's outcome and the operator's `simulate`, one operation. */
export function createSandboxSettlement(
  deps: Pick<PaymentRequestServiceDeps, 'clock' | 'paymentRules' | 'sandboxProvider' | 'onRefundQueued'>,
  view: View,
) {
  const { clock } = deps
  const { settleInSandbox } = deps.paymentRules

  /**
   * The sandbox provider's reversal (simulate with outcome `reversed`): payment-rules.ts recordReversal takes the
   * money back at once, under the request's lock; 200 with the request and its Payment as they now are, the audit
   * trail saying which operator reversed how much.
   */
  async function reverse(uow: UnitOfWork, ctx: OperationContext, amount: SimulateOutcome['amount'], now: string) {
    const { clientCode, id } = ctx
    const reversed = await deps.paymentRules.recordReversal(
      uow,
      clientCode,
      id,
      amount && { amountMinor: toMinor(amount.amount), currency: amount.currency },
      now,
    )
    const amountReversed = money(BigInt(reversed.payment.reversed_minor), reversed.payment.currency)
    if (ctx.operator) {
      await recordAudit(uow.tx, {
        action: 'payment_request.simulated',
        clientCode,
        targetType: 'payment_request',
        targetId: id,
        details: { outcome: 'reversed', reversedAmount: amountReversed },
        change: { outcome: 'reversed', reversedAmount: amountReversed },
        occurredAt: now,
      })
    }
    return { status: 200 as const, body: () => view(uow.tx, clientCode, reversed.request, reversed.payment) }
  }

  /**
   * The payment confirmation through the sandbox provider: the hosted page's test form (settleFromPage) and the
   * operator's `simulate` run this one operation. It locks the request once (settleInSandbox) and answers from
   * the rows it holds: 201 when it recorded the Payment, 200 when that outcome was already recorded. When an
   * operator acts, the audit trail says who decided the outcome. Not a Source write. Separate from the page's Pay
   * (a checkout at a real provider: payments/checkout.ts), which settles nothing itself.
   */
  const confirmOperation = defineOperation({
    kind: 'payment_confirmation',
    scopes: [],
    body: SimulateOutcome,
    response: PaymentRequestResponse,
    source: false,
    async run(uow: UnitOfWork, ctx: OperationContext, { outcome, amount }: SimulateOutcome) {
      const { clientCode, id } = ctx
      const now = isoNow(clock)
      if (outcome === 'reversed') return reverse(uow, ctx, amount, now)
      const settle = deps.sandboxProvider?.settle
      if (!settle) throw new Problem('route_not_found', 'No payment provider form is offered by this deployment.')
      const recorded = await settleInSandbox(uow, { settle }, clientCode, id, outcome, now)
      // The pay-time check canceled it: the cancel commits, and the answer shows the request canceled (the
      // simulate route answers 409 from it, the hosted page shows the page).
      if (recorded.canceled) return { status: 200, body: () => view(uow.tx, clientCode, recorded.request, null) }
      // An operator made money move (in the sandbox): the audit trail says who decided the outcome.
      if (recorded.created && ctx.operator) {
        await recordAudit(uow.tx, {
          action: 'payment_request.simulated',
          clientCode,
          targetType: 'payment_request',
          targetId: id,
          details: { outcome },
          change: { outcome },
          occurredAt: now,
        })
      }
      // A Payment with unapplied money has its refund queued (payment-rules.ts): the refund worker asks soon.
      const refundQueued = recorded.created && BigInt(recorded.payment.unapplied_minor) > 0n ? deps.onRefundQueued : undefined
      return {
        status: recorded.created ? 201 : 200,
        body: () => view(uow.tx, clientCode, recorded.request, recorded.payment),
        ...(refundQueued ? { afterCommit: refundQueued } : {}),
      }
    },
  })

  return { confirmOperation }
}
