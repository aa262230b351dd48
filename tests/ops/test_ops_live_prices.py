"""fleet --live-prices: the Price List API through a real boto3 client under botocore's Stubber."""

from __future__ import annotations

import json

import boto3
import pytest
from botocore.stub import Stubber

from cdk_llm_serving.ops.cli import main
from cdk_llm_serving.ops.live_prices import hosting_price
from tests.support.sagemaker_responses import config_response, endpoint_response, model_response
from tests.support.stubbed_aws import CREDENTIALS, stubbed_client


def product(instance_type: str, usage: str, usd: str) -> str:
    return json.dumps({
        "product": {"attributes": {"instanceName": instance_type, "regionCode": "us-west-2", "usagetype": usage}},
        "terms": {"OnDemand": {"SKU.TERM": {"priceDimensions": {"SKU.TERM.DIM": {"unit": "Hrs", "pricePerUnit": {"USD": usd}}}}}},
    })  # fmt: skip


def expect(
    stubber: Stubber,
    instance_type: str,
    price_list: list[str],
    next_token: str | None = None,
    token: str | None = None,
) -> None:
    request = {
        "ServiceCode": "AmazonSageMaker",
        "Filters": [
            {"Type": "TERM_MATCH", "Field": "regionCode", "Value": "us-west-2"},
            {"Type": "TERM_MATCH", "Field": "instanceName", "Value": instance_type},
        ],
    }
    if token:
        request["NextToken"] = token
    response = {
        "PriceList": price_list,
        "FormatVersion": "aws_v1",
        **({"NextToken": next_token} if next_token else {}),
    }
    stubber.add_response("get_products", response, request)


@pytest.fixture
def pricing():
    with stubbed_client("pricing", "us-east-1") as stubbed:
        yield stubbed


def test_hosting_price_skips_training_products_and_follows_pages(pricing):
    client, stubber = pricing
    expect(
        stubber,
        "ml.g6e.12xlarge",
        [product("ml.g6e.12xlarge", "USW2-Train:ml.g6e.12xlarge", "12.0")],
        next_token="page2",
    )
    expect(
        stubber,
        "ml.g6e.12xlarge",
        [product("ml.g6e.12xlarge", "USW2-Host:ml.g6e.12xlarge", "14.25")],
        token="page2",
    )
    assert hosting_price(client, "us-west-2", "ml.g6e.12xlarge") == 14.25


def test_fleet_live_prices_reprices_the_pools_and_saves_a_price_file(pricing, tmp_path, capsys):
    client, stubber = pricing
    sagemaker = boto3.client("sagemaker", region_name="us-west-2", **CREDENTIALS)
    pools = [("ml.g6e.12xlarge", None), ("ml.g6.12xlarge", None)]
    saved = tmp_path / "prices.json"
    with Stubber(sagemaker) as sm:
        sm.add_response(
            "describe_endpoint",
            endpoint_response([("ml.g6e.12xlarge", 2), ("ml.g6.12xlarge", 1)]),
            {"EndpointName": "serving"},
        )
        sm.add_response(
            "describe_endpoint_config",
            config_response("config-a", pools),
            {"EndpointConfigName": "config-a"},
        )
        sm.add_response(
            "describe_model",
            model_response("full-model", {"SM_VLLM_SERVED_MODEL_NAME": "gpt-oss-20b"}),
            {"ModelName": "full-model"},
        )
        expect(
            stubber,
            "ml.g6.12xlarge",
            [product("ml.g6.12xlarge", "USW2-Host:ml.g6.12xlarge", "6.5")],
        )
        expect(stubber, "ml.g6e.12xlarge", [])  # not listed: keeps the catalog price
        code = main(
            ["fleet", "serving", "--json", "--live-prices", "--save-prices", str(saved)],
            clients={"sagemaker": sagemaker, "pricing": client},
        )
    data = json.loads(capsys.readouterr().out)
    assert code == 0
    prices = {p["instance_type"]: p["price_per_hour"] for p in data["variants"][0]["pools"]}
    assert prices["ml.g6.12xlarge"] == 6.5 and prices["ml.g6e.12xlarge"] == 13.1232
    assert data["variants"][0]["hourly_cost"] == pytest.approx(2 * 13.1232 + 6.5, abs=0.01)
    written = json.loads(saved.read_text())
    assert written["region"] == "us-west-2" and written["prices"]["ml.g6.12xlarge"] == 6.5
    assert "AWS Price List API, us-west-2" in written["source"]
